-- dptext 0.1.0 -> 0.2.0 (ALTER EXTENSION dptext UPDATE TO '0.2.0').
-- Adds the computed-once store of model-based outputs (docs/masking.md,
-- "Computed once": dptext.store, warm, store_prune, store_summary), the
-- OS-random shuffle key of inheritance reads, and create_sanitized_view's
-- warm-first fill. tests/upgrade_check.py checks that a database updated by
-- this script has exactly the objects and function bodies of a fresh 0.2.0.

\echo Use "ALTER EXTENSION dptext UPDATE TO '0.2.0'" to load this file. \quit

CREATE FUNCTION dptext."shuffle_key"() RETURNS double precision /* f64 */
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'shuffle_key_wrapper';
CREATE FUNCTION dptext."_warm"(
	"source" oid, /* pg_sys :: Oid */
	"batch_size" INT /* i32 */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_warm_wrapper';
CREATE FUNCTION dptext."_store_prune"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_store_prune_wrapper';

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

CREATE OR REPLACE FUNCTION dptext.create_sanitized_view(source regclass, target text, materialized boolean DEFAULT true)
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

REVOKE EXECUTE ON FUNCTION dptext.warm(regclass, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext._warm(oid, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext.store_prune() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION dptext._store_prune() FROM PUBLIC;
