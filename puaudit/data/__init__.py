"""Reading tables, the input vocabulary and column roles, generated demo data, limits and JSON."""
