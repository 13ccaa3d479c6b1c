-- An audit record says whether an operator token made the change (a
-- tenant's limits set by ax's operator) or one of the tenant's own tokens:
-- the subject alone cannot tell, since a tenant's issuer chooses its
-- subjects freely. A constant default: no table rewrite.
ALTER TABLE audit_log ADD COLUMN operator boolean NOT NULL DEFAULT false;
