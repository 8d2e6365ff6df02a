-- +goose Up
-- audit_search_ids as in 00165, its step 3 given the index's head as a
-- value instead of a subquery: planned with the head unknown, the search of
-- the leaves after it became a parallel scan of every sealed event (the
-- name search's page took a second at 10M events, against 13 ms before
-- 00165; docs/benchmarks.md, 2026-12-07). And the events waiting for the
-- sealer are read from audit_unsealed alone, which holds the whole event
-- since 00162, instead of joining the queue to the audit_events view: the
-- join reached audit_sealed too (the view's other branch), and with the
-- queue's size unknown to the planner (a queue is never analyzed; its
-- pages are those of events since sealed) it could hash the join over a
-- scan of every sealed event of every tenant.
SET LOCAL ROLE jejak_owner;

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
    head bigint;
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

    -- 3. And the events not in the index yet: those waiting for the
    -- sealer, read from the queue itself (it holds the whole event; its
    -- columns named as audit_events', for the filters), and those sealed
    -- since the indexer's
    -- last batch, through the leaves after its head (one snapshot: the
    -- indexer moves its head in the transaction that writes the index).
    -- UNION, not UNION ALL, for the leaves: a migrated v1 event was in
    -- the index before the sealer made it a leaf, so it may be both in
    -- the index and after the head until the indexer passes it. The head
    -- is read first and given as a value: as a subquery its value was
    -- unknown when the statement was planned, a third of the tenant's
    -- leaves was the guess, and the plan scanned every sealed event of
    -- every tenant (1 s at 10M events).
    SELECT h.size INTO head FROM public.audit_search_heads h WHERE h.tenant_id = tenant;
    RETURN QUERY EXECUTE
        'SELECT id FROM (SELECT unnest($15) AS id'
     || ' UNION ALL SELECT e.id FROM (SELECT q.tenant_id, q.event_id AS id, q.actor_kind, q.actor_id, q.action, q.entity,'
     || ' q.entity_id, q.detail, q.occurred_at, q.trace_id, q.job_id FROM public.audit_unsealed q) e'
     || ' WHERE e.tenant_id = $1 AND public.audit_search_text(e.detail) LIKE $2'
     || CASE WHEN p_before IS NOT NULL THEN ' AND e.id < $3' ELSE '' END || f
     || ' UNION SELECT e.id FROM public.audit_leaves l JOIN public.audit_sealed e ON e.tenant_id = l.tenant_id AND e.id = l.event_id'
     || ' WHERE l.tenant_id = $1 AND l.seq > $16'
     || ' AND public.audit_search_text(e.detail) LIKE $2'
     || CASE WHEN p_before IS NOT NULL THEN ' AND e.id < $3' ELSE '' END || f || ') x ORDER BY 1 DESC LIMIT $14'
        USING tenant, p_pattern, p_before, p_actions, p_action, p_entity, p_entity_id, p_actor_kind,
              p_actor_id, p_trace_id, p_job_id, p_from, p_to, p_lim, coalesce(found, '{}'), coalesce(head, 0);
END
$$;
-- +goose StatementEnd
