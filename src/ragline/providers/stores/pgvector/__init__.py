"""PostgreSQL + pgvector: a server-grade store shared by many ragline processes."""
