-- dptext's catalog: rules declared with SECURITY LABEL, sanitized views
-- with provenance, and the epsilon budget. Installed by CREATE EXTENSION
-- (extension_sql_file! in extension/src/lib.rs), after every function.

-- Every column rule: SECURITY LABEL FOR dptext ON COLUMN t.c IS 'MASKED WITH ...'.
-- The proxy and dptext.create_sanitized_view read this view. Labels are
-- validated when set, so parse_rule never fails here; dropped columns and
-- tables take their labels with them.
CREATE VIEW dptext.rules AS
SELECT n.nspname AS schema_name,
       c.relname AS table_name,
       a.attname AS column_name,
       c.oid AS table_oid,
       a.attnum AS attnum,
       r.rule ->> 'mechanism' AS mechanism,
       r.rule -> 'params' AS params,
       r.rule -> 'guarantee' AS guarantee,
       l.label,
       r.rule ->> 'group_column' AS group_column
  FROM pg_catalog.pg_seclabel l
  JOIN pg_catalog.pg_class c ON c.oid = l.objoid
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = l.objsubid
 CROSS JOIN LATERAL (SELECT dptext.parse_rule(l.label) AS rule) r
 WHERE l.provider = 'dptext'
   AND l.classoid = 'pg_catalog.pg_class'::regclass
   AND l.objsubid > 0
   AND NOT a.attisdropped
   -- `ALLOW` declares a column safe to read raw: not a rule.
   AND pg_catalog.upper(pg_catalog.btrim(l.label)) <> 'ALLOW';
COMMENT ON VIEW dptext.rules IS
  'dptext masking rules: one row per column labelled with SECURITY LABEL FOR dptext ... IS ''MASKED WITH mechanism(...)''';

-- Roles whose sessions are masked: SECURITY LABEL FOR dptext ON ROLE r IS 'MASKED'.
CREATE VIEW dptext.masked_roles AS
SELECT r.rolname AS role_name, r.oid AS role_oid
  FROM pg_catalog.pg_shseclabel l
  JOIN pg_catalog.pg_roles r ON r.oid = l.objoid
 WHERE l.provider = 'dptext'
   AND l.classoid = 'pg_catalog.pg_authid'::regclass;
COMMENT ON VIEW dptext.masked_roles IS
  'Roles labelled SECURITY LABEL FOR dptext ON ROLE r IS ''MASKED''';

-- One row per sanitized column per build (create_sanitized_view) or
-- refresh (REFRESH MATERIALIZED VIEW, recorded by an event trigger).
-- Rows outlive the views: a release stays spent after its view is dropped.
CREATE TABLE dptext.provenance (
    id bigserial PRIMARY KEY,
    -- rows written by one build or refresh share this number
    build bigint NOT NULL,
    built_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    built_by name NOT NULL DEFAULT session_user,
    event text NOT NULL CHECK (event IN ('create', 'refresh')),
    source_oid oid NOT NULL,
    source_schema name NOT NULL,
    source_table name NOT NULL,
    target_oid oid NOT NULL,
    target_name text NOT NULL,
    materialized boolean NOT NULL,
    column_name name NOT NULL,
    mechanism text NOT NULL,
    params jsonb NOT NULL,
    guarantee jsonb NOT NULL,
    randomness text NOT NULL CHECK (randomness IN ('os', 'seeded', 'keyed')),
    -- the key's public id (a short hash, never the key) or the seed
    random_id text,
    assets jsonb NOT NULL
);
COMMENT ON TABLE dptext.provenance IS
  'How each sanitized view column was produced: source, rule, guarantee, randomness (key id, never the key), asset versions, time';
SELECT pg_catalog.pg_extension_config_dump('dptext.provenance', '');
SELECT pg_catalog.pg_extension_config_dump('dptext.provenance_id_seq', '');
CREATE SEQUENCE dptext.build_seq;
SELECT pg_catalog.pg_extension_config_dump('dptext.build_seq', '');

-- Epsilon spent per source column, by kind of guarantee (docs/mechanisms.md):
-- independent releases compose by sum. Builds that reuse the same key (or
-- seed) with the same mechanism and parameters give the same output for
-- the same value, so they count once; every build or refresh in OS mode
-- is a new release, and a plain (not materialized) view in OS mode draws
-- anew on every query: unbounded.
CREATE VIEW dptext.budget AS
WITH releases AS (
    SELECT DISTINCT ON (p.source_oid, p.column_name, release)
           p.*,
           CASE WHEN p.random_id IS NULL THEN p.id::text
                ELSE pg_catalog.jsonb_build_array(p.randomness, p.random_id, p.mechanism, p.params)::text
           END AS release
      FROM dptext.provenance p
     ORDER BY p.source_oid, p.column_name, release, p.id
)
SELECT source_schema,
       source_table,
       column_name,
       guarantee ->> 'kind' AS guarantee,
       count(*) AS releases,
       -- Kind none has no epsilon to add up: NULL, and rests_on says why
       -- and what to read instead. An infinite epsilon (JSON stores it as
       -- null) and a plain view drawing anew on every query count as
       -- infinity.
       CASE WHEN guarantee ->> 'kind' = 'none' THEN NULL
            WHEN bool_or(NOT materialized AND random_id IS NULL) THEN 'infinity'::float8
            ELSE sum(coalesce((guarantee ->> 'eps')::float8, 'infinity')) END AS eps_total,
       CASE WHEN guarantee ->> 'kind' <> 'umldp' THEN NULL
            WHEN bool_or(NOT materialized AND random_id IS NULL) THEN 'infinity'::float8
            ELSE sum(coalesce((guarantee ->> 'eps0')::float8, 'infinity')) END AS eps0_total,
       bool_or(NOT materialized AND random_id IS NULL) AS unbounded,
       min(built_at) AS first_release,
       max(built_at) AS last_release,
       -- Vocabulary releases (kind set_union) only: their deltas, summed.
       CASE WHEN guarantee ->> 'kind' <> 'set_union' THEN NULL
            ELSE sum((guarantee ->> 'delta')::float8) END AS delta_total,
       -- What the latest release's guarantee rests on (detection's misses,
       -- the stage a chain's guarantee comes from, why there is none).
       (pg_catalog.array_agg(coalesce(guarantee ->> 'rests_on', guarantee ->> 'reason')
                             ORDER BY built_at DESC))[1] AS rests_on
  FROM releases
 GROUP BY source_oid, source_schema, source_table, column_name, guarantee ->> 'kind';
COMMENT ON VIEW dptext.budget IS
  'Epsilon spent per source column and kind of guarantee: per-token (per-span for deidentify) eps summed over independent releases';
COMMENT ON COLUMN dptext.budget.eps_total IS
  'Per token (per span for deidentify), summed over independent releases; NULL for kind none (rests_on says why); NOT per value: a value of n tokens composes to up to n times this (the cost''s worst_case_eps states it per value)';
COMMENT ON COLUMN dptext.budget.delta_total IS
  'Vocabularies (kind set_union) only: delta summed over their releases; their eps is per value of the column, spent once per vocabulary however many mechanisms use it';
COMMENT ON COLUMN dptext.budget.rests_on IS
  'What the guarantee rests on, from the latest release: for detection-based rules, that spans detection misses pass unchanged (with the shipped detector''s measured recall); for a chain, which stage''s guarantee it is; for kind none, why there is none and what to read instead';
COMMENT ON COLUMN dptext.budget.eps0_total IS
  'SanText+ only: the additive term ln(1/p) per token, summed over independent releases';

-- The callers the SECURITY DEFINER recorders below accept: a session
-- that is not masked, whose login role owns `tgt` (or is a member of its
-- owner; superusers are). They write the provenance, the budget and the
-- fill queries that refresh_sanitized_table runs as whoever refreshes, so
-- a role granted EXECUTE on them must not be able to rewrite another
-- owner's records.
CREATE FUNCTION dptext._require_owner(tgt regclass)
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (dptext.session_masking() ->> 'masked')::boolean THEN
        RAISE EXCEPTION 'masked sessions cannot record dptext provenance' USING ERRCODE = '42501';
    END IF;
    IF NOT pg_catalog.pg_has_role(session_user,
            (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tgt), 'USAGE') THEN
        RAISE EXCEPTION 'only the owner of % may record its dptext provenance', tgt USING ERRCODE = '42501';
    END IF;
END $$;
REVOKE EXECUTE ON FUNCTION dptext._require_owner(regclass) FROM PUBLIC;

-- Records one provenance row per rule of the source, as the view was
-- just built from them. SECURITY DEFINER so that builders need no INSERT
-- on the table; it copies rules from the catalog, never from its caller.
CREATE FUNCTION dptext._record_build(src regclass, tgt regclass, mat boolean)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rnd jsonb := dptext.randomness();
    b bigint := nextval('dptext.build_seq');
BEGIN
    PERFORM dptext._require_owner(tgt);
    INSERT INTO dptext.provenance (build, event, source_oid, source_schema, source_table,
                                   target_oid, target_name, materialized, column_name,
                                   mechanism, params, guarantee, randomness, random_id, assets)
    SELECT b, 'create', src, r.schema_name, r.table_name, tgt, tgt::text, mat, r.column_name,
           r.mechanism, r.params, r.guarantee, rnd ->> 'mode',
           coalesce(rnd ->> 'key_id', 'seed ' || (rnd ->> 'seed')), dptext.asset_versions()
      FROM dptext.rules r
     WHERE r.table_oid = src
     ORDER BY r.attnum;
    RETURN b;
END $$;
REVOKE EXECUTE ON FUNCTION dptext._record_build(regclass, regclass, boolean) FROM PUBLIC;

-- Sanitized copies of Citus distributed or reference tables are tables
-- (Citus does not distribute materialized views): what fills each one, for
-- dptext.refresh_sanitized_table.
CREATE TABLE dptext.sanitized_tables (
    target_oid oid PRIMARY KEY,
    source_oid oid NOT NULL,
    fill_query text NOT NULL
);
COMMENT ON TABLE dptext.sanitized_tables IS
  'Sanitized tables built by create_sanitized_view from Citus distributed or reference tables, with the query that fills them';
SELECT pg_catalog.pg_extension_config_dump('dptext.sanitized_tables', '');

-- How Citus distributes `rel`: 'h' (hash, by `col`), 'n' (reference
-- table); NULL when Citus is not installed or `rel` is a local table.
CREATE FUNCTION dptext._citus_distribution(rel regclass, OUT method text, OUT col text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'SELECT p.partmethod::text,
                    CASE WHEN p.partmethod = ''h''
                         THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END
               FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
       INTO method, col USING rel;
END $$;

-- One provenance row per column of the last build of `tgt`, with the
-- randomness of now: a refresh is a new release in OS mode.
CREATE FUNCTION dptext._record_refresh(tgt oid)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    last_build bigint;
    rnd jsonb := dptext.randomness();
    b bigint;
BEGIN
    PERFORM dptext._require_owner(tgt::regclass);
    SELECT max(p.build) INTO last_build FROM dptext.provenance p
     WHERE p.target_oid = tgt AND p.event = 'create';
    IF last_build IS NULL THEN
        RETURN NULL;
    END IF;
    b := nextval('dptext.build_seq');
    INSERT INTO dptext.provenance (build, event, source_oid, source_schema, source_table,
                                   target_oid, target_name, materialized, column_name,
                                   mechanism, params, guarantee, randomness, random_id, assets)
    SELECT b, 'refresh', p.source_oid, p.source_schema, p.source_table, p.target_oid,
           p.target_name, true, p.column_name, p.mechanism, p.params, p.guarantee,
           rnd ->> 'mode', coalesce(rnd ->> 'key_id', 'seed ' || (rnd ->> 'seed')),
           dptext.asset_versions()
      FROM dptext.provenance p
     WHERE p.build = last_build
     ORDER BY p.id;
    RETURN b;
END $$;
REVOKE EXECUTE ON FUNCTION dptext._record_refresh(oid) FROM PUBLIC;

-- Remembers what fills a sanitized table (SECURITY DEFINER: builders need
-- no INSERT on the catalog table).
CREATE FUNCTION dptext._record_table(tgt regclass, src regclass, fill text)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT dptext._require_owner(tgt);
    INSERT INTO dptext.sanitized_tables (target_oid, source_oid, fill_query)
    VALUES (tgt, src, fill)
    ON CONFLICT (target_oid) DO UPDATE SET source_oid = EXCLUDED.source_oid, fill_query = EXCLUDED.fill_query;
$$;
REVOKE EXECUTE ON FUNCTION dptext._record_table(regclass, regclass, text) FROM PUBLIC;

-- Builds a view (or materialized view) of `source` with every labelled
-- column passed through its rule and every other column unchanged, records
-- provenance, and comments the view with what was applied.
CREATE FUNCTION dptext.create_sanitized_view(source regclass, target text, materialized boolean DEFAULT true)
RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
    parts text[] := pg_catalog.parse_ident(target);
    qualified text;
    select_list text[] := '{}';
    col record;
    rules_applied text[] := '{}';
    rnd jsonb := dptext.randomness();
    created regclass;
    summary text;
    dist record;
    fill text;
    kind text;
BEGIN
    IF pg_catalog.array_length(parts, 1) > 2 THEN
        RAISE EXCEPTION 'target "%" has too many dots: give name or schema.name', target
            USING ERRCODE = '22023';
    END IF;
    qualified := CASE WHEN pg_catalog.array_length(parts, 1) = 2
                      THEN pg_catalog.format('%I.%I', parts[1], parts[2])
                      ELSE pg_catalog.format('%I', parts[1]) END;
    FOR col IN
        SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS typ, r.mechanism, r.params, r.label,
               r.group_column
          FROM pg_catalog.pg_attribute a
          LEFT JOIN dptext.rules r ON r.table_oid = a.attrelid AND r.attnum = a.attnum
         WHERE a.attrelid = source AND a.attnum > 0 AND NOT a.attisdropped
         ORDER BY a.attnum
    LOOP
        IF col.mechanism IS NULL THEN
            select_list := select_list || pg_catalog.format('%I', col.attname);
        ELSE
            IF col.group_column IS NOT NULL THEN
                -- GROUPED BY: the row's grouping value fixes the date shift.
                select_list := select_list || pg_catalog.format(
                    'dptext.apply_rule(%I::text, %L, %L::jsonb, %I::text)::%s AS %I',
                    col.attname, col.mechanism, col.params::text, col.group_column, col.typ, col.attname);
            ELSE
                select_list := select_list || pg_catalog.format(
                    'dptext.apply_rule(%I::text, %L, %L::jsonb)::%s AS %I',
                    col.attname, col.mechanism, col.params::text, col.typ, col.attname);
            END IF;
            rules_applied := rules_applied || pg_catalog.format('%s: %s',
                col.attname, (dptext.parse_rule(col.label)) ->> 'label');
        END IF;
    END LOOP;
    IF pg_catalog.cardinality(rules_applied) = 0 THEN
        RAISE EXCEPTION 'no dptext rule on any column of %', source
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('declare one first: SECURITY LABEL FOR dptext ON COLUMN %s.<column> IS ''MASKED WITH santext(eps => 3)''', source);
    END IF;
    IF rnd ->> 'mode' = 'seeded' THEN
        RAISE WARNING 'building % under dptext.seed: the seed is recorded in dptext.provenance, so anyone can rerun the mechanism with it and test guessed values against the view offline', qualified
            USING HINT = 'build published views under a secret key (dptext.key_file); keep seeds for tests';
    END IF;
    IF NOT materialized AND rnd ->> 'mode' = 'keyed' THEN
        -- A plain view computes at every read, as its reader: the reader
        -- needs EXECUTE on the rule function, and under the key that
        -- function on a guessed text gives the view's output for it.
        RAISE EXCEPTION 'a plain sanitized view under a key would let its readers test guessed values against it: they would need EXECUTE on dptext.apply_rule, which gives the same output for the same text'
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('build a materialized view (materialized => true), or label the readers MASKED: they then read %s masked, with no function to call', source);
    END IF;
    IF NOT materialized AND rnd ->> 'mode' = 'os' THEN
        RAISE WARNING 'the plain view % draws fresh randomness on every query, so every query spends the budget again', qualified
            USING HINT = 'use a materialized view, or set dptext.key so that repeated queries return the same output';
    END IF;
    SELECT * INTO dist FROM dptext._citus_distribution(source);
    IF materialized AND rnd ->> 'mode' = 'keyed' AND dist.method IS NULL
       AND pg_catalog.current_setting('dptext.store')::boolean
       AND pg_catalog.has_function_privilege('dptext.warm(regclass, integer)', 'EXECUTE') THEN
        -- Model-based rules: compute the values in batches first, so that
        -- the view's own query serves them from the store.
        PERFORM dptext.warm(source);
    END IF;
    IF materialized AND dist.method IN ('h', 'n') THEN
        -- A Citus distributed (or reference) source: a table distributed
        -- like it and co-located with it, filled by INSERT ... SELECT,
        -- which Citus runs on the workers, shard by shard, in parallel.
        EXECUTE pg_catalog.format('CREATE TABLE %s (LIKE %s)', qualified, source);
        created := qualified::regclass;
        IF dist.method = 'h' THEN
            PERFORM pg_catalog.create_distributed_table(created, dist.col, colocate_with => source::text);
        ELSE
            PERFORM pg_catalog.create_reference_table(created);
        END IF;
        fill := pg_catalog.format('INSERT INTO %s SELECT %s FROM %s',
            created, pg_catalog.array_to_string(select_list, ', '), source);
        EXECUTE fill;
        PERFORM dptext._record_table(created, source, fill);
        kind := 'TABLE';
    ELSE
        EXECUTE pg_catalog.format('CREATE %s VIEW %s AS SELECT %s FROM %s',
            CASE WHEN materialized THEN 'MATERIALIZED' ELSE '' END,
            qualified, pg_catalog.array_to_string(select_list, ', '), source);
        created := qualified::regclass;
        kind := CASE WHEN materialized THEN 'MATERIALIZED VIEW' ELSE 'VIEW' END;
    END IF;
    PERFORM dptext._record_build(source, created, materialized);
    summary := pg_catalog.format('dptext: sanitized from %s at %s; %s; randomness %s; see dptext.provenance',
        source, pg_catalog.now(), pg_catalog.array_to_string(rules_applied, '; '),
        CASE rnd ->> 'mode' WHEN 'keyed' THEN 'keyed (key id ' || (rnd ->> 'key_id') || ')'
                            WHEN 'seeded' THEN 'seeded (seed ' || (rnd ->> 'seed') || ')'
                            ELSE 'os' END);
    EXECUTE pg_catalog.format('COMMENT ON %s %s IS %L', kind, qualified, summary);
    RETURN created;
END $$;
COMMENT ON FUNCTION dptext.create_sanitized_view(regclass, text, boolean) IS
  'Creates a (materialized) view of source with every labelled column sanitized by its rule; records provenance';

-- Re-runs the fill of a sanitized table (a Citus source's sanitized copy):
-- empties it and fills it again with the rules it was built with, on the
-- workers, and records the refresh in dptext.provenance. Returns the rows.
CREATE FUNCTION dptext.refresh_sanitized_table(target regclass)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    fill text;
    n bigint;
BEGIN
    SELECT t.fill_query INTO fill FROM dptext.sanitized_tables t WHERE t.target_oid = target;
    IF fill IS NULL THEN
        RAISE EXCEPTION '% is not a sanitized table built by dptext.create_sanitized_view', target
            USING ERRCODE = '22023',
                  HINT = 'sanitized materialized views are refreshed with REFRESH MATERIALIZED VIEW';
    END IF;
    EXECUTE pg_catalog.format('TRUNCATE %s', target);
    EXECUTE fill;
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM dptext._record_refresh(target);
    RETURN n;
END $$;
COMMENT ON FUNCTION dptext.refresh_sanitized_table(regclass) IS
  'Empties a sanitized table (built by create_sanitized_view from a Citus table) and fills it again with its rules; records provenance';

-- REFRESH MATERIALIZED VIEW of a sanitized view re-runs the rules it was
-- built with (they are part of its definition): record them again with
-- the randomness of the refresh, since in OS mode every refresh is a new
-- release.
CREATE FUNCTION dptext._on_refresh() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cmd record;
BEGIN
    FOR cmd IN SELECT objid FROM pg_catalog.pg_event_trigger_ddl_commands()
                WHERE command_tag = 'REFRESH MATERIALIZED VIEW'
    LOOP
        PERFORM dptext._record_refresh(cmd.objid);
    END LOOP;
END $$;
REVOKE EXECUTE ON FUNCTION dptext._on_refresh() FROM PUBLIC;
CREATE EVENT TRIGGER dptext_record_refresh ON ddl_command_end
    WHEN TAG IN ('REFRESH MATERIALIZED VIEW')
    EXECUTE FUNCTION dptext._on_refresh();

-- The user's own recognizers (docs/detection.md, "Your own recognizers"):
-- read by detect_pii, deidentify, ndd_distort and masked reads. Each row
-- is a regular expression (pattern) or a deny list (words) for one label;
-- context words raise the score of a match they precede. Rows are checked
-- when written, and every session sees a committed change at its next
-- statement. Only the extension's owner may change them.
CREATE TABLE dptext.recognizers (
    name text PRIMARY KEY,
    label text NOT NULL,
    pattern text,
    words text[],
    context text[] NOT NULL DEFAULT '{}',
    score float8 NOT NULL DEFAULT 0.85,
    CHECK (words IS NULL OR pg_catalog.array_ndims(words) = 1),
    CHECK (pg_catalog.array_ndims(context) IS NULL OR pg_catalog.array_ndims(context) = 1),
    CHECK (dptext.recognizer_ok(name, label, pattern, words, context, score))
);
COMMENT ON TABLE dptext.recognizers IS
  'Custom recognizers: a regular expression (pattern) or a word list (words) per row, with a label, context words and a score';
-- Texts that are never PII, whatever found them (case-insensitive).
CREATE TABLE dptext.allow_list (
    value text PRIMARY KEY
);
COMMENT ON TABLE dptext.allow_list IS
  'Texts never reported as PII (case-insensitive, the whole span)';
-- Row changes do not invalidate caches by themselves: tell every session.
-- SECURITY DEFINER: a role the owner grants INSERT may change the rows, and
-- every session must still hear of it. ENABLE ALWAYS: also under
-- session_replication_role = replica (restores, logical replication).
CREATE FUNCTION dptext._recognizers_trigger() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
  PERFORM dptext._recognizers_changed(TG_RELID);
  RETURN NULL;
END $$;
CREATE TRIGGER recognizers_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
  ON dptext.recognizers FOR EACH STATEMENT EXECUTE FUNCTION dptext._recognizers_trigger();
CREATE TRIGGER allow_list_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
  ON dptext.allow_list FOR EACH STATEMENT EXECUTE FUNCTION dptext._recognizers_trigger();
ALTER TABLE dptext.recognizers ENABLE ALWAYS TRIGGER recognizers_changed;
ALTER TABLE dptext.allow_list ENABLE ALWAYS TRIGGER allow_list_changed;
REVOKE EXECUTE ON FUNCTION dptext._recognizers_trigger() FROM PUBLIC;
-- The user's rows are configuration: pg_dump keeps them.
SELECT pg_catalog.pg_extension_config_dump('dptext.recognizers', '');
SELECT pg_catalog.pg_extension_config_dump('dptext.allow_list', '');
REVOKE EXECUTE ON FUNCTION dptext._recognizers_changed(oid) FROM PUBLIC;

-- Vocabularies drawn from a column with differential privacy
-- (docs/vocabulary.md): built by dptext.build_vocabulary, used by
-- santext, santext_plus and custext with "vocabulary": name. A table, not
-- a file, because the server cannot write into the assets directory. Only
-- released words are stored (no exact counts), so everyone may read them.
CREATE TABLE dptext.vocabularies (
    name text PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$'),
    source text NOT NULL,
    source_oid oid NOT NULL,
    column_name name NOT NULL,
    eps float8 NOT NULL,
    delta float8 NOT NULL,
    noise text NOT NULL CHECK (noise IN ('laplace', 'gaussian')),
    threshold float8 NOT NULL,
    max_words_per_value integer NOT NULL,
    embedding text NOT NULL,
    embedding_rows integer NOT NULL,
    digest text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    created_by name NOT NULL DEFAULT session_user,
    words text[] NOT NULL CHECK (pg_catalog.array_ndims(words) IS NULL OR pg_catalog.array_ndims(words) = 1)
);
COMMENT ON TABLE dptext.vocabularies IS
  'Vocabularies released with differential privacy (set union) from a column, by name, with their (eps, delta)';
SELECT pg_catalog.pg_extension_config_dump('dptext.vocabularies', '');
-- Every session drops its loaded vocabularies when the table changes.
CREATE TRIGGER vocabularies_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
  ON dptext.vocabularies FOR EACH STATEMENT EXECUTE FUNCTION dptext._recognizers_trigger();
ALTER TABLE dptext.vocabularies ENABLE ALWAYS TRIGGER vocabularies_changed;

-- Stores a released vocabulary and records its release in provenance,
-- against the source column, once (SECURITY DEFINER: builders need no
-- INSERT on the catalog).
CREATE FUNCTION dptext._record_vocabulary(src regclass, col name, v jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rnd jsonb := dptext.randomness();
BEGIN
    PERFORM dptext._require_owner(src);
    INSERT INTO dptext.vocabularies (name, source, source_oid, column_name, eps, delta, noise,
                                     threshold, max_words_per_value, embedding, embedding_rows,
                                     digest, words)
    VALUES (v ->> 'name', v ->> 'source', src, col, (v ->> 'eps')::float8, (v ->> 'delta')::float8,
            v ->> 'noise', (v ->> 'threshold')::float8, (v ->> 'max_words_per_value')::integer,
            v ->> 'embedding', (v ->> 'embedding_rows')::integer, v ->> 'digest',
            ARRAY(SELECT jsonb_array_elements_text(v -> 'words')));
    INSERT INTO dptext.provenance (build, event, source_oid, source_schema, source_table,
                                   target_oid, target_name, materialized, column_name,
                                   mechanism, params, guarantee, randomness, random_id, assets)
    SELECT nextval('dptext.build_seq'), 'create', src, n.nspname, c.relname, 0,
           'vocabulary ' || (v ->> 'name'), true, col, 'vocabulary',
           jsonb_build_object('name', v -> 'name', 'eps', v -> 'eps', 'delta', v -> 'delta',
                              'noise', v -> 'noise', 'max_words_per_value', v -> 'max_words_per_value',
                              'embedding', v -> 'embedding', 'digest', v -> 'digest'),
           jsonb_build_object('kind', 'set_union', 'eps', v -> 'eps', 'delta', v -> 'delta'),
           rnd ->> 'mode', coalesce(rnd ->> 'key_id', 'seed ' || (rnd ->> 'seed')),
           dptext.asset_versions()
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = src;
END $$;
REVOKE EXECUTE ON FUNCTION dptext._record_vocabulary(regclass, name, jsonb) FROM PUBLIC;

-- Draws a vocabulary from `column_name` of `source` with (eps, delta)-DP
-- (set union: each value's distinct words counted once, at most
-- max_words_per_value of them, noisy counts over a threshold set by
-- delta), stores it as `name` and records the release in provenance.
-- Reads the column with the caller's privileges. Returns a summary; its
-- exact counts (values, candidates) are for the builder, not released.
CREATE FUNCTION dptext.build_vocabulary(source regclass, column_name text, eps float8, delta float8,
                                        name text, max_words_per_value integer DEFAULT 32,
                                        noise text DEFAULT 'laplace')
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v jsonb;
BEGIN
    IF EXISTS (SELECT 1 FROM dptext.vocabularies x WHERE x.name = build_vocabulary.name) THEN
        RAISE EXCEPTION 'vocabulary "%" already exists', build_vocabulary.name
            USING ERRCODE = '42710',
                  HINT = 'choose another name, or DELETE FROM dptext.vocabularies WHERE name = ... first (mechanisms that used it then draw differently)';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = source AND a.attname = column_name
                      AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'column "%" of % does not exist', column_name, source
            USING ERRCODE = '42703';
    END IF;
    v := dptext._vocabulary_release(source::oid, column_name, eps, delta, build_vocabulary.name,
                                    max_words_per_value, noise);
    PERFORM dptext._record_vocabulary(source, column_name::name, v - 'summary');
    RETURN pg_catalog.jsonb_build_object(
        'name', v -> 'name', 'words', pg_catalog.jsonb_array_length(v -> 'words'),
        'threshold', v -> 'threshold', 'eps', v -> 'eps', 'delta', v -> 'delta',
        'noise', v -> 'noise', 'max_words_per_value', v -> 'max_words_per_value',
        'digest', v -> 'digest') || (v -> 'summary');
END $$;
COMMENT ON FUNCTION dptext.build_vocabulary(regclass, text, float8, float8, text, integer, text) IS
  'Draws a vocabulary from a column with (eps, delta)-DP set union, stores it in dptext.vocabularies and records the release in dptext.provenance';

GRANT USAGE ON SCHEMA dptext TO PUBLIC;
-- Text-like columns without a dptext label (neither a rule nor ALLOW,
-- on the column or on the same-named column of an ancestor), with the
-- masked roles that may read them: what dptext.deny_unlabelled_text
-- refuses, and what masked roles read raw while it is off.
CREATE VIEW dptext.unlabelled_text_columns AS
WITH RECURSIVE anc(rel, anc) AS (
    SELECT c.oid, c.oid FROM pg_catalog.pg_class c
    UNION
    SELECT anc.rel, i.inhparent FROM anc JOIN pg_catalog.pg_inherits i ON i.inhrelid = anc.anc
)
SELECT n.nspname AS schema_name,
       c.relname AS table_name,
       a.attname AS column_name,
       pg_catalog.format_type(a.atttypid, a.atttypmod) AS type,
       ARRAY(SELECT m.role_name FROM dptext.masked_roles m
              WHERE pg_catalog.has_column_privilege(m.role_oid, c.oid, a.attnum, 'SELECT')
              ORDER BY m.role_name)::text[] AS masked_readers
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_catalog.pg_type base ON base.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
  LEFT JOIN pg_catalog.pg_type elem ON elem.oid = base.typelem AND base.typcategory = 'A'
  LEFT JOIN pg_catalog.pg_range rng ON rng.rngtypid = coalesce(elem.oid, base.oid)
                                    OR rng.rngmultitypid = coalesce(elem.oid, base.oid)
  LEFT JOIN pg_catalog.pg_type sub ON sub.oid = rng.rngsubtype
 WHERE c.relkind IN ('r', 'p', 'm', 'f')
   AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', 'dptext')
   AND n.nspname NOT LIKE 'pg\_temp\_%' AND n.nspname NOT LIKE 'pg\_toast\_temp\_%'
   -- As dptext.deny_unlabelled_text reads types: the string and user-defined
   -- categories (json, jsonb, xml, bytea, tsvector, hstore...), composites,
   -- ranges of those, their domains and arrays.
   AND (coalesce(elem.typcategory, base.typcategory) IN ('S', 'U', 'C')
        OR sub.typcategory IN ('S', 'U', 'C'))
   AND NOT EXISTS (
       SELECT 1 FROM anc
         JOIN pg_catalog.pg_attribute fa ON fa.attrelid = anc.anc AND fa.attname = a.attname
         JOIN pg_catalog.pg_seclabel l ON l.objoid = anc.anc AND l.objsubid = fa.attnum
              AND l.classoid = 'pg_catalog.pg_class'::regclass AND l.provider = 'dptext'
        WHERE anc.rel = c.oid);
COMMENT ON VIEW dptext.unlabelled_text_columns IS
  'Text-like columns (string and user-defined types: text, varchar, char, name, citext, json, jsonb, xml, bytea, tsvector, hstore; composites; ranges, domains and arrays of these) with no dptext label, and the masked roles that may read them: raw to those roles unless dptext.deny_unlabelled_text is on, refused to them when it is';

-- The computed-once store (docs/masking.md, "Computed once"): outputs of
-- model-based rules under the key, computed once per (value, rule, key)
-- and served to masked reads, apply_rule and sanitized copies. A row's
-- tag is an HMAC, under a key derived from the masking key, of the rule's
-- identity, the grouping value and the raw value: it reveals nothing
-- about the raw value without the key, and a changed rule or key gives
-- other tags. Read and written by the extension below SQL; nobody else
-- has any privilege on it. Duplicates (two sessions filing one value at
-- once) are harmless: every copy of a tag holds the same output.
CREATE TABLE dptext.store (
    tag bytea NOT NULL,
    output text NOT NULL,
    rule_id text NOT NULL,
    key_id text NOT NULL,
    filled_at timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp()
);
CREATE INDEX store_tag ON dptext.store USING btree (tag);
COMMENT ON TABLE dptext.store IS
  'dptext computed-once store: keyed outputs of model-based rules, filed by a keyed tag; read by masked reads, apply_rule and sanitized copies; filled by them and by dptext.warm';
REVOKE ALL ON dptext.store FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('dptext.store', '');

-- Computes into the store every value of `source` whose rule runs a model
-- (deidentify, ndd, chains with them), many values per model call, with a
-- NOTICE of progress every 5 seconds. Needs a key. Returns how many values
-- it computed (values already stored are skipped).
CREATE FUNCTION dptext.warm(source regclass, batch_size integer DEFAULT 32)
RETURNS bigint
LANGUAGE sql AS $$ SELECT dptext._warm(source::oid, batch_size) $$;
COMMENT ON FUNCTION dptext.warm(regclass, integer) IS
  'Computes the keyed outputs of source''s model-based rules into dptext.store, batch_size values per model call, so that masked reads and sanitized copies serve them without running the models';

-- Removes store entries no current value needs: of another key, of a rule
-- no label uses any more, or of a value no labelled column holds now.
-- Returns how many it removed.
CREATE FUNCTION dptext.store_prune()
RETURNS bigint
LANGUAGE sql AS $$ SELECT dptext._store_prune() $$;
COMMENT ON FUNCTION dptext.store_prune() IS
  'Deletes dptext.store entries of other keys, of rules no longer labelled, and of values no labelled column holds any more';

-- What the store holds, per rule and key (no tags, no outputs).
CREATE VIEW dptext.store_summary AS
SELECT rule_id, key_id, pg_catalog.count(*) AS entries,
       pg_catalog.sum(pg_catalog.pg_column_size(output))::bigint AS output_bytes,
       pg_catalog.min(filled_at) AS first_filled, pg_catalog.max(filled_at) AS last_filled
  FROM dptext.store GROUP BY rule_id, key_id;
COMMENT ON VIEW dptext.store_summary IS
  'dptext.store by rule and key: entries, bytes of outputs, first and last fill';
REVOKE ALL ON dptext.store_summary FROM PUBLIC;

GRANT SELECT ON dptext.rules, dptext.masked_roles, dptext.provenance, dptext.budget, dptext.unlabelled_text_columns TO PUBLIC;
GRANT SELECT ON dptext.sanitized_tables TO PUBLIC;
GRANT SELECT ON dptext.recognizers, dptext.allow_list TO PUBLIC;
GRANT SELECT ON dptext.vocabularies TO PUBLIC;

-- Privileges: keyed or seeded outputs are a function of the value, so
-- whoever may call the functions while a key is set can test guesses
-- against a sanitized view. Nobody may call them until granted
-- (docs/sql-reference.md, "Privileges").
REVOKE EXECUTE ON FUNCTION santext(text, double precision, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION santext_plus(text, double precision, double precision, double precision, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION sanitize(text, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION custext(text, double precision, integer, text, text, boolean, text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext_info() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION detect_pii(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION deidentify(text, text, double precision, boolean, text, boolean, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION ndd_distort(text, text, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.apply_rule(text, text, jsonb) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.apply_rule(text, text, jsonb, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.create_sanitized_view(regclass, text, boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.refresh_sanitized_table(regclass) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.build_vocabulary(regclass, text, float8, float8, text, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext._vocabulary_release(oid, text, float8, float8, text, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.warm(regclass, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext._warm(oid, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.store_prune() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext._store_prune() FROM PUBLIC;
