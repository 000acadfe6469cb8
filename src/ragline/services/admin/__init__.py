"""Keys, health and info, backups, export and import."""
