-- +goose Up
-- The name search's keys gain word pairs, and its walk stops at a full
-- page.
--
-- A pair key is two adjacent words of a search text ("musim 42"). A
-- project named "Katalog Musim 42" among Melati's 2.7M events had no rare
-- key: "musim" (a sixteenth of the names) was whole but common, and "42",
-- the term's last word and so a prefix, stood for 42, 420-429 and
-- 4200-4299 (16,000 postings), so the search walked the window and the
-- trigram index (50-90 ms). "musim 42%" stands only for the names where
-- "musim" is followed by a word starting with "42": the term's page from
-- a few hundred postings. A pair of the term is usable when its first
-- word is (something other than a letter or digit precedes it); it is a
-- prefix when its second word is the term's last.
--
-- The walk of the newest events (a common phrase) read its whole window
-- (50,000 events) to learn where the window ended even when the first
-- thousands filled the page; it now stops at a full page and finds the
-- window's end only when it must go on below it.
SET LOCAL ROLE jejak_owner;

-- The keys of a search text: its runs of letters and digits, each cut to
-- 100 characters, and each with the next one after a space (two words in
-- adjacent names pair too: a key only proposes candidates, the term's
-- LIKE decides).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION audit_search_words(t text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH w AS (
        SELECT pg_catalog.left(x, 100) AS w, n
          FROM pg_catalog.regexp_split_to_table(t, '[^[:alnum:]]+') WITH ORDINALITY AS r(x, n) WHERE x <> ''
    )
    SELECT coalesce(array_agg(DISTINCT k), '{}')
      FROM (SELECT w AS k FROM w UNION ALL SELECT w || ' ' || lead(w) OVER (ORDER BY n) FROM w) keys
     WHERE k IS NOT NULL
$$;
-- +goose StatementEnd

-- The pairs of the events already sealed, as the migrating user: row-level
-- security is forced on audit_words and the owner role may only read it.
RESET ROLE;
INSERT INTO audit_words (tenant_id, word, event_id)
SELECT s.tenant_id, w, s.event_id FROM audit_search s, unnest(audit_search_words(s.text)) AS w
 WHERE w LIKE '% %'
ON CONFLICT DO NOTHING;
SET LOCAL ROLE jejak_owner;

-- audit_search_ids as in 00143, its keys now words and pairs, its walk
-- stopping at a full page.
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
    parts text[];
    n integer;
    key text;
    is_prefix boolean;
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

    -- The rarest usable key, counted below the cursor. The term is the
    -- pattern without its two '%'; its escaped wildcards are not letters,
    -- so they only split words.
    parts := regexp_split_to_array(substr(p_pattern, 2, length(p_pattern) - 2), '[^[:alnum:]]+');
    n := cardinality(parts);
    FOR i IN 2..n LOOP
        CONTINUE WHEN parts[i] = '';
        -- The word alone, then with the next word (a pair key).
        FOR k IN 0..1 LOOP
            IF k = 0 THEN
                key := parts[i];
                is_prefix := i = n;
            ELSE
                EXIT WHEN i = n OR parts[i + 1] = '';
                key := parts[i] || ' ' || parts[i + 1];
                is_prefix := i + 1 = n;
            END IF;
            IF is_prefix THEN
                key := key || '%';
            END IF;
            EXECUTE 'SELECT count(*)::integer FROM (SELECT 1 FROM public.audit_words w WHERE w.tenant_id = $1 AND w.word '
                 || CASE WHEN is_prefix THEN 'LIKE' ELSE '=' END || ' $2'
                 || CASE WHEN p_before IS NOT NULL THEN ' AND w.event_id < $3' ELSE '' END || ' LIMIT $4) c'
                INTO cnt USING tenant, key, p_before, cap;
            IF best IS NULL OR cnt < best_n THEN
                best := key;
                best_n := cnt;
            END IF;
        END LOOP;
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
        EXECUTE 'SELECT array_agg(event_id ORDER BY event_id DESC) FROM (SELECT s.event_id FROM'
             || ' (SELECT s.event_id, s.text FROM public.audit_search s WHERE s.tenant_id = $1'
             || CASE WHEN p_before IS NOT NULL THEN ' AND s.event_id < $3' ELSE '' END
             || ' ORDER BY s.event_id DESC LIMIT $15) s WHERE ' || hit || ' ORDER BY s.event_id DESC LIMIT $14) x'
            INTO found
            USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
                  p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim, win;
        found := coalesce(found, '{}');
        IF cardinality(found) < p_lim THEN
            -- The page is not full, so the whole window was walked: its
            -- last event, when the tenant has that many, is where the
            -- index takes over (an index-only count, no rows read).
            EXECUTE 'SELECT s.event_id FROM public.audit_search s WHERE s.tenant_id = $1'
                 || CASE WHEN p_before IS NOT NULL THEN ' AND s.event_id < $2' ELSE '' END
                 || ' ORDER BY s.event_id DESC OFFSET $3 - 1 LIMIT 1'
                INTO floor_id USING tenant, p_before, win;
        END IF;
        IF floor_id IS NOT NULL THEN
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
