-- Regression test of masking rules declared with SECURITY LABEL, the rules
-- view, sanitized views with provenance, the budget, and parallel = serial
-- under a key. Run by scripts/test.sh; expected output in
-- tests/expected/rules.out.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS dptext CASCADE;
CREATE EXTENSION dptext;
SET dptext.key = 'regression key, not a real secret';

CREATE TABLE records (id int PRIMARY KEY, name varchar(40), note text, visits int);
INSERT INTO records
  SELECT g, (ARRAY['Kathryn Herrera', 'John Smith', 'Zoë Müller'])[1 + g % 3],
         'Patient ' || g || ' reports fever and cough since monday.', g % 7
    FROM generate_series(1, 1000) g;

-- Rules are validated when the label is set.
SECURITY LABEL FOR dptext ON COLUMN records.note IS 'MASKED WITH santext(eps => 3)';
SECURITY LABEL FOR dptext ON COLUMN records.name IS 'MASKED WITH deidentify(strategy => typed_placeholder)';
SECURITY LABEL FOR dptext ON COLUMN records.note IS 'MASKED WITH santext(eps => -1)';
\echo :LAST_ERROR_SQLSTATE
SECURITY LABEL FOR dptext ON COLUMN records.note IS 'MASKED WITH santext(eps => 3; DROP TABLE records)';
\echo :LAST_ERROR_SQLSTATE
SECURITY LABEL FOR dptext ON COLUMN records.visits IS 'MASKED WITH santext(eps => 3)';
\echo :LAST_ERROR_SQLSTATE
SECURITY LABEL FOR dptext ON TABLE records IS 'MASKED WITH santext(eps => 3)';
\echo :LAST_ERROR_SQLSTATE
DROP ROLE IF EXISTS regress_analyst;
CREATE ROLE regress_analyst;
SECURITY LABEL FOR dptext ON ROLE regress_analyst IS 'MASKED';
SECURITY LABEL FOR dptext ON ROLE regress_analyst IS 'UNMASKED';
\echo :LAST_ERROR_SQLSTATE

-- What the proxy and the view builder read.
SELECT schema_name, table_name, column_name, attnum, mechanism, params, guarantee, label
  FROM dptext.rules ORDER BY attnum;
-- Role labels are cluster-wide: other databases' roles are left out.
SELECT role_name FROM dptext.masked_roles WHERE role_name LIKE 'regress%';
SELECT dptext.parse_rule('MASKED WITH santext_plus(eps => 3)');

-- A sanitized materialized view: protected columns differ, others are equal.
SELECT dptext.create_sanitized_view('records', 'records_safe');
SELECT id, name, note, visits FROM records_safe ORDER BY id LIMIT 3;
SELECT count(*) AS rows,
       count(*) FILTER (WHERE s.note <> r.note) AS notes_changed,
       count(*) FILTER (WHERE s.name = '<PERSON>') AS names_replaced,
       count(*) FILTER (WHERE s.visits = r.visits) AS visits_equal
  FROM records r JOIN records_safe s USING (id);
SELECT regexp_replace(obj_description('records_safe'::regclass), ' at [^;]+;', ' at <time>;') AS comment;

-- Provenance: one row per rule and build; the key's id, never the key.
SELECT build, event, source_schema, source_table, target_name, materialized, column_name,
       mechanism, params, guarantee, randomness, random_id, assets ? 'glove-6b-50d' AS has_assets
  FROM dptext.provenance ORDER BY id;

-- REFRESH re-runs the rules; under the same key unchanged rows stay unchanged.
CREATE TABLE before AS SELECT * FROM records_safe;
UPDATE records SET note = 'A new note.' WHERE id = 1;
REFRESH MATERIALIZED VIEW records_safe;
SELECT count(*) FILTER (WHERE b.note = s.note) AS unchanged, count(*) FILTER (WHERE b.note <> s.note) AS changed
  FROM before b JOIN records_safe s USING (id);
SELECT build, event, column_name, randomness FROM dptext.provenance ORDER BY id;

-- The budget: same key and rule, one release; without a key every build is new.
SELECT source_table, column_name, guarantee, releases, eps_total, eps0_total, unbounded
  FROM dptext.budget ORDER BY column_name;
RESET dptext.key;
SET dptext.seed = 3;
SELECT dptext.create_sanitized_view('records', 'public.records_seeded');
RESET dptext.seed;
SELECT dptext.create_sanitized_view('records', 'records_plain', materialized => false);
-- Under a key a plain view is refused: its readers would need EXECUTE on
-- dptext.apply_rule, which would test their guesses against it.
SET dptext.key = 'regression key, not a real secret';
SELECT dptext.create_sanitized_view('records', 'records_plain_keyed', materialized => false);
\echo :LAST_ERROR_SQLSTATE
RESET dptext.key;
SELECT source_table, column_name, guarantee, releases, eps_total, unbounded
  FROM dptext.budget ORDER BY column_name;
SELECT dptext.create_sanitized_view('records', 'records_safe');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE unlabelled (a text);
SELECT dptext.create_sanitized_view('unlabelled', 'unlabelled_safe');
\echo :LAST_ERROR_SQLSTATE

-- Parallel workers compute exactly what a serial plan computes, under a key.
SET dptext.key = 'regression key, not a real secret';
SET max_parallel_workers_per_gather = 0;
CREATE TABLE serial_out AS SELECT id, dptext.apply_rule(note, 'santext', '{"eps": 3}') AS s FROM records;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT id, dptext.apply_rule(note, 'santext', '{"eps": 3}') AS s FROM records;
CREATE TABLE parallel_out AS SELECT id, dptext.apply_rule(note, 'santext', '{"eps": 3}') AS s FROM records;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.s = b.s) AS equal,
       count(*) FILTER (WHERE a.s = r.note) AS equal_to_source
  FROM serial_out a JOIN parallel_out b USING (id) JOIN records_safe r USING (id);
RESET max_parallel_workers_per_gather;

-- Dropping labelled columns and tables takes their rules with them.
DROP MATERIALIZED VIEW records_safe, records_seeded;
DROP VIEW records_plain;
ALTER TABLE records DROP COLUMN name;
SELECT column_name FROM dptext.rules;
DROP TABLE records;
SELECT count(*) AS rules_left FROM dptext.rules;
SELECT count(*) AS labels_left FROM pg_seclabel WHERE provider = 'dptext';
DROP ROLE regress_analyst;
SELECT count(*) AS role_labels_left FROM pg_shseclabel l
 WHERE l.provider = 'dptext' AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = l.objoid);
-- Provenance outlives the views: the releases stay spent.
SELECT count(*) AS provenance_rows FROM dptext.provenance;
