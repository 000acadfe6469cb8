"""Pure domain code: types, the where language, ids. No I/O."""
