-- +goose Up
-- The name search keeps only the events that have a name. An event whose
-- detail holds no string (a sign-in, a daily export, a job's failure:
-- 7.3M of the 10M events at scale, 73 % of Melati's trail) has the search
-- text '[]', which no term can match (a term is at least three
-- characters), yet the search's walk of the newest events read every one
-- of them: 36,000 rows for the 50 newest "katalog musim" where 10,000
-- named ones held them. The sealer no longer writes those rows (nor
-- their trigram entries), and the window of the walk is now the newest
-- named events.
SET LOCAL ROLE jejak_owner;

-- As the migrating user: row-level security is forced on audit_search and
-- the owner role may only read it.
RESET ROLE;
DELETE FROM audit_search WHERE text = '[]';
SET LOCAL ROLE jejak_owner;
