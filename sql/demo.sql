-- The dptext demo: synthetic clinical notes, sanitized in SQL.
-- Run by scripts/demo.sh against its throwaway cluster.
\set ON_ERROR_STOP 1
\set QUIET on
\pset format wrapped
\pset columns 150
\pset pager off
SET client_min_messages = warning;

DROP EXTENSION IF EXISTS dptext CASCADE;
CREATE EXTENSION dptext;

\echo '--- loading 240 synthetic notes (sql/demo_data.sql)'
\i sql/demo_data.sql
SELECT count(*) AS notes FROM records;

-- A seed makes the demo reproducible; production uses the OS generator or
-- a secret key (dptext.key_file), see docs/settings.md, "Keys".
SET dptext.seed = 2026;

\echo '--- the raw notes'
SELECT id, note FROM records ORDER BY id LIMIT 5;

\echo '--- SanText, eps = 3: every word re-drawn near itself in GloVe space'
SELECT id, santext(note, 3) AS santext FROM records ORDER BY id LIMIT 5;

\echo '--- SanText+, eps = 3, p = 0.3, w = 0.9: rare (sensitive) words always re-drawn, common ones kept with probability 0.7'
SELECT id, santext_plus(note, 3) AS santext_plus FROM records ORDER BY id LIMIT 5;

\echo '--- CusText, eps = 2, K = 20, balanced mapping, record level, stopwords kept: each word drawn from its customized output set'
SELECT id, custext(note, 2) AS custext FROM records ORDER BY id LIMIT 5;

\echo '--- PII spans in note 2 (ONNX token classifier + rules)'
SELECT d.* FROM records r, detect_pii(r.note) d WHERE r.id = 2;

\echo '--- entity replacement (full_entity surrogates, p = 1: eps 0 by the lemma)'
SELECT id, deidentify(note) AS deidentified FROM records ORDER BY id LIMIT 3;

\echo '--- NDD: how much an edit disturbs its context (fitting replacement first, unfitting second; smaller fits better)'
SELECT round(ndd('Masao Yoshikawa was defeated in the match in Hokkaido .',
                 'Masao Yoshikawa was defeated in the match in Moscow .')::numeric, 3) AS fitting,
       round(ndd('Masao Yoshikawa was defeated in the match in Hokkaido .',
                 'Masao Yoshikawa was defeated in the match in 1926 .')::numeric, 3) AS unfitting;

\echo '--- semantics-preserved distortion (NDD picks, among 8 surrogates, the one that fits the context best; no formal DP guarantee)'
SELECT id, ndd_distort(note) AS ndd_distort FROM records ORDER BY id LIMIT 3;

\echo '--- what one call costs'
SELECT jsonb_pretty(sanitize(note, 'santext_plus', '{"eps": 3}') -> 'cost') AS cost FROM records WHERE id = 1;

\echo '--- rules declared once, in SQL, as security labels: the name column replaced whole, the notes'
\echo '--- through detection (names and places replaced, IDs redacted, dates shifted alike for one patient)'
SECURITY LABEL FOR dptext ON COLUMN records.note IS
  'MASKED WITH deidentify(operators => ''DATE:shift,ID:redact'') GROUPED BY patient';
SECURITY LABEL FOR dptext ON COLUMN records.patient IS 'MASKED WITH deidentify(whole => true)';
SELECT column_name, label, guarantee ->> 'kind' AS guarantee, guarantee ->> 'rests_on' AS rests_on
  FROM dptext.rules WHERE table_name = 'records' ORDER BY column_name;
\echo '--- where a formal bound on every word is wanted: a word-level stage after detection'
SELECT jsonb_pretty(dptext.parse_rule(
  'MASKED WITH deidentify(operators => ''DATE:shift,ID:redact'') THEN santext_plus(eps => 3)') -> 'guarantee') AS guarantee;

\echo '--- a sanitized materialized view built from the rules under a secret key, with provenance and a budget'
-- Under a key, not a seed: a seed recorded in dptext.provenance would let
-- anyone rerun the mechanism with it and confirm guessed names offline.
-- The key file is the throwaway cluster's (scripts/cluster.sh made it).
SET dptext.key_file = :'keyfile';
SELECT dptext.create_sanitized_view('records', 'records_sanitized');
SELECT count(*) AS rows,
       count(*) FILTER (WHERE s.note <> r.note) AS changed,
       count(*) FILTER (WHERE s.id = r.id) AS ids_equal
  FROM records_sanitized s JOIN records r USING (id);
SELECT id, patient, note FROM records_sanitized ORDER BY id LIMIT 3;
SELECT column_name, mechanism, randomness, random_id, event FROM dptext.provenance;
SELECT source_table, column_name, guarantee, releases, eps_total, rests_on FROM dptext.budget ORDER BY column_name;

\echo '--- masking at the source: the role analyst is labelled MASKED, and gets the same key'
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'analyst') THEN
    CREATE ROLE analyst LOGIN;
  END IF;
END $$;
SECURITY LABEL FOR dptext ON ROLE analyst IS 'MASKED';
ALTER ROLE analyst SET dptext.key_file = :'keyfile';
GRANT SELECT ON records, records_sanitized TO analyst;
SELECT role_name FROM dptext.masked_roles;

\echo '--- the same queries as the owner (raw values) ...'
SELECT id, patient, left(note, 80) AS note FROM records ORDER BY id LIMIT 3;
SELECT count(*) AS notes_naming_kathryn_herrera FROM records WHERE note LIKE '%Kathryn Herrera%';
\c - analyst
\echo '--- ... and as analyst: every read of a labelled column goes through its rule, keyed,'
\echo '--- so filters, functions and counts see only sanitized text'
SELECT id, patient, left(note, 80) AS note FROM records ORDER BY id LIMIT 3;
SELECT count(*) AS notes_naming_kathryn_herrera FROM records WHERE note LIKE '%Kathryn Herrera%';
SELECT dptext.session_masking() ->> 'masked' AS masked, dptext.session_masking() ->> 'key_id' AS key_id;
\echo '--- a masked role cannot write labelled tables (SQLSTATE 42501)'
\set ON_ERROR_STOP 0
UPDATE records SET note = 'x' WHERE id = 1;
\set ON_ERROR_STOP 1
\c - postgres
