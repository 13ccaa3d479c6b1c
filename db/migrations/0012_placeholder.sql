-- Placeholder for a migration of another branch (dropped at merge).
SELECT 1;
