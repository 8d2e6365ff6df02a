-- +goose Up
-- A rare name is found through the tenant's word postings instead of the
-- trigram index. The trigram index keeps one posting list per trigram
-- for every tenant together: "promo senja 4242" (one project's 146 events
-- among Melati's 2.7M) read 1,082 index pages, nearly all of them the
-- lists of its common trigrams ("pro", "sen", "nja", ...) spanning 10M
-- events, while "4242" alone read 44. audit_words holds, per tenant,
-- every word of each sealed event's search text with the event's id, so
-- the search counts the postings of each word of the term it can use (a
-- few index pages each, counting stops at a cap), walks the rarest one's
-- newest first and checks each candidate against the whole term.
-- Written by the sealer in the transaction that writes audit_search, so
-- recording an event stays one insert.
SET LOCAL ROLE jejak_owner;

-- The words of a search text: its runs of letters and digits, each once,
-- cut to 100 characters (a term is at most 100, so a cut word still
-- starts with any term word it began with, and no complete term word can
-- equal a cut one). The search splits a term with the same expression.
-- +goose StatementBegin
CREATE FUNCTION audit_search_words(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT pg_catalog.left(w, 100)), '{}')
      FROM pg_catalog.regexp_split_to_table(t, '[^[:alnum:]]+') AS w WHERE w <> ''
$$;
-- +goose StatementEnd

-- word in the C collation: a prefix (the last word of a term may be cut
-- short) is a range of the primary key.
CREATE TABLE audit_words (
    tenant_id bigint NOT NULL,
    word      text COLLATE "C" NOT NULL,
    event_id  bigint NOT NULL,
    PRIMARY KEY (tenant_id, word, event_id)
);

INSERT INTO audit_words (tenant_id, word, event_id)
SELECT s.tenant_id, w, s.event_id FROM audit_search s, unnest(audit_search_words(s.text)) AS w;

REVOKE ALL ON audit_words FROM jejak_app, jejak_system;
GRANT SELECT, INSERT ON audit_words TO jejak_system;
ALTER TABLE audit_words ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_words FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON audit_words TO jejak_app
    USING (tenant_id = app_tenant_id()) WITH CHECK (tenant_id = app_tenant_id());
CREATE POLICY system_access ON audit_words TO jejak_system USING (true) WITH CHECK (true);
CREATE POLICY owner_search ON audit_words FOR SELECT TO jejak_owner USING (true);

-- audit_search_ids as before (migrations 00120, 00140, 00142), now:
--   1. when a word of the term that a word posting can stand for is
--      rare (at most jejak.search_word_cap postings below the cursor,
--      500: counting stops there), that word's postings newest first,
--      each checked against the whole term: a rare name, by key;
--   2. otherwise a walk of the newest sealed events (jejak.search_window,
--      50,000), which answers a phrase common in the tenant, and the
--      trigram index below it when the page is not full;
--   3. the events still waiting for the sealer, through its queue.
-- A word of the term stands for a word of the text only when something
-- other than a letter or digit precedes it in the term (else it may end
-- a longer word): one followed by such a character too is a whole word,
-- the term's last word is a prefix. "katalog musim 42" can use "musim"
-- (whole) and "42" (prefix), never "katalog".
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_search_ids(p_pattern text, p_before bigint, p_lim integer, p_actions text[], p_action text,
    p_entity text, p_entity_id text, p_actor_kind text, p_actor_id bigint, p_trace_id text, p_job_id bigint,
    p_from timestamptz, p_to timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 50 SET search_path = pg_catalog, public AS $$
DECLARE
    tenant bigint := public.app_tenant_id();
    win integer := coalesce(nullif(current_setting('jejak.search_window', true), '')::integer, 50000);
    cap integer := coalesce(nullif(current_setting('jejak.search_word_cap', true), '')::integer, 500);
    f text := '';
    hit text := 's.text LIKE $2';
    floor_id bigint;
    found bigint[];
    more bigint[];
    walked integer;
    parts text[];
    n integer;
    key text;
    cnt integer;
    best text;
    best_n integer;
BEGIN
    IF tenant IS NULL OR NOT public.app_is_member() THEN
        RETURN;
    END IF;
    IF p_actions IS NOT NULL THEN f := f || ' AND e.action = ANY($4)'; END IF;
    IF p_action IS NOT NULL THEN f := f || ' AND e.action = $5'; END IF;
    IF p_entity IS NOT NULL THEN f := f || ' AND e.entity = $6'; END IF;
    IF p_entity_id IS NOT NULL THEN f := f || ' AND e.entity_id = $7'; END IF;
    IF p_actor_kind IS NOT NULL THEN f := f || ' AND e.actor_kind = $8'; END IF;
    IF p_actor_id IS NOT NULL THEN f := f || ' AND e.actor_id = $9'; END IF;
    IF p_trace_id IS NOT NULL THEN f := f || ' AND e.trace_id = $10'; END IF;
    IF p_job_id IS NOT NULL THEN f := f || ' AND e.job_id = $11'; END IF;
    IF p_from IS NOT NULL THEN f := f || ' AND e.occurred_at >= $12'; END IF;
    IF p_to IS NOT NULL THEN f := f || ' AND e.occurred_at < $13'; END IF;
    IF f <> '' THEN
        -- Other filters are the event's columns: checked for matches only.
        hit := hit || ' AND EXISTS (SELECT 1 FROM public.audit_events e WHERE e.tenant_id = $1 AND e.id = s.event_id' || f || ')';
    END IF;

    -- The rarest usable word, counted below the cursor. The term is the
    -- pattern without its two '%'; its escaped wildcards are not letters,
    -- so they only split words.
    parts := regexp_split_to_array(substr(p_pattern, 2, length(p_pattern) - 2), '[^[:alnum:]]+');
    n := cardinality(parts);
    FOR i IN 2..n LOOP
        CONTINUE WHEN parts[i] = '';
        key := CASE WHEN i = n THEN parts[i] || '%' ELSE parts[i] END;
        EXECUTE 'SELECT count(*)::integer FROM (SELECT 1 FROM public.audit_words w WHERE w.tenant_id = $1 AND w.word '
             || CASE WHEN i = n THEN 'LIKE' ELSE '=' END || ' $2'
             || CASE WHEN p_before IS NOT NULL THEN ' AND w.event_id < $3' ELSE '' END || ' LIMIT $4) c'
            INTO cnt USING tenant, key, p_before, cap;
        IF best IS NULL OR cnt < best_n THEN
            best := key;
            best_n := cnt;
        END IF;
    END LOOP;

    IF best IS NOT NULL AND best_n < cap THEN
        -- 1. The postings newest first (a whole word's from its key; a
        -- prefix's, several words, sorted, each event once), each
        -- checked by primary key until the page is full. The check is a
        -- lateral lookup kept apart (OFFSET 0) so the planner cannot
        -- answer it with the trigram index, as it did for a join.
        EXECUTE 'SELECT array_agg(event_id ORDER BY event_id DESC) FROM (SELECT c.event_id FROM (SELECT '
             || CASE WHEN right(best, 1) = '%' THEN 'DISTINCT ' ELSE '' END
             || 'w.event_id FROM public.audit_words w WHERE w.tenant_id = $1 AND w.word '
             || CASE WHEN right(best, 1) = '%' THEN 'LIKE' ELSE '=' END || ' $15'
             || CASE WHEN p_before IS NOT NULL THEN ' AND w.event_id < $3' ELSE '' END
             || ' ORDER BY w.event_id DESC) c'
             || ' CROSS JOIN LATERAL (SELECT 1 FROM public.audit_search s WHERE s.tenant_id = $1 AND s.event_id = c.event_id AND '
             || hit || ' OFFSET 0) h ORDER BY c.event_id DESC LIMIT $14) x'
            INTO found
            USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
                  p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim, best;
    ELSE
        -- 2. The newest sealed events below the cursor, then the trigram
        -- index below them. The index's matches are sorted, not read in
        -- key order (event_id + 0): LIKE's estimate for a short term
        -- ("4242": 21,457 rows for 146) made the planner walk the key
        -- backwards, filtering 982,248 rows. A term reaching the index
        -- matches at most about one event in a thousand, so the sort is
        -- small.
        EXECUTE 'SELECT count(*)::integer, min(w.event_id), (array_agg(w.event_id ORDER BY w.event_id DESC) FILTER (WHERE w.hit))[1:$14]'
             || ' FROM (SELECT s.event_id, (' || hit || ') AS hit FROM public.audit_search s WHERE s.tenant_id = $1'
             || CASE WHEN p_before IS NOT NULL THEN ' AND s.event_id < $3' ELSE '' END
             || ' ORDER BY s.event_id DESC LIMIT $15) w'
            INTO walked, floor_id, found
            USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
                  p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim, win;
        found := coalesce(found, '{}');
        IF walked >= win AND cardinality(found) < p_lim THEN
            EXECUTE 'SELECT array_agg(event_id ORDER BY event_id DESC) FROM (SELECT s.event_id FROM public.audit_search s'
                 || ' WHERE s.tenant_id = $1 AND ' || hit || ' AND s.event_id < $15'
                 || ' ORDER BY s.event_id + 0 DESC LIMIT $14) x'
                INTO more
                USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
                      p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim - cardinality(found), floor_id;
            found := found || coalesce(more, '{}');
        END IF;
    END IF;

    -- 3. And the events still waiting for the sealer, through its queue.
    RETURN QUERY EXECUTE
        'SELECT id FROM (SELECT unnest($15) AS id'
     || ' UNION ALL SELECT e.id FROM public.audit_unsealed u JOIN public.audit_events e ON e.tenant_id = u.tenant_id AND e.id = u.event_id'
     || ' WHERE u.tenant_id = $1 AND public.audit_search_text(e.detail) LIKE $2'
     || CASE WHEN p_before IS NOT NULL THEN ' AND e.id < $3' ELSE '' END || f || ') x ORDER BY 1 DESC LIMIT $14'
        USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
              p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim, coalesce(found, '{}');
END
$$;
-- +goose StatementEnd
