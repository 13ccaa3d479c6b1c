-- Placeholder: another branch's migration takes this number (dropped at merge).
SELECT 1;
