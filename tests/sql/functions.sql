-- Regression test of the SQL surface: outputs, NULLs, SQLSTATEs, odd inputs,
-- parallel execution. Run by scripts/test.sh; expected output in
-- tests/expected/functions.out.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS dptext CASCADE;
CREATE EXTENSION dptext;

-- Seeded outputs are a function of (seed, input, parameters).
SET dptext.seed = 11;
SELECT santext('The patient was admitted with chest pain and a mild fever.', 3);
SELECT santext_plus('The patient was admitted with chest pain and a mild fever.', 3);
SELECT santext_plus('The patient was admitted with chest pain.', 3, p => 0.0, w => 0.5);
SELECT santext('Unbelievable results', 1000, embedding => 'wordpiece');
SELECT santext('The patient was admitted.', 3) = santext('The patient was admitted.', 3) AS same_twice;
SELECT (sanitize('The patient was admitted.', 'santext', '{"eps": 3}') ->> 'text')
     = santext('The patient was admitted.', 3) AS sanitize_matches_santext;
SELECT sanitize('The patient was admitted.', 'santext', '{"eps": 2}') -> 'cost' -> 'guarantee' AS guarantee;
SELECT custext('The doctor saw the patient and the doctor left.', 2);
SELECT custext('The doctor saw the patient.', 2, k => 20, mapping => 'balanced', level => 'token', keep_stopwords => false);
SELECT sanitize('The doctor saw the patient.', 'custext', '{"eps": 2}') -> 'cost' -> 'guarantee' AS custext_guarantee;

-- Typed PII spans with 1-based character positions.
SELECT start_pos, end_pos, label, value, round(score::numeric, 2) AS score,
       substr(t, start_pos, end_pos - start_pos) = value AS substr_matches
  FROM (SELECT 'Zoë Müller (DOB 03/14/1931, MRN-580486) called (555) 123-4567 from St. Mary''s Hospital.'::text AS t) x,
       detect_pii(t);
SELECT count(*) AS spans_in_empty FROM detect_pii('');
SELECT deidentify('Call Kathryn Herrera at (555) 123-4567 about MRN-580486.', 'typed_placeholder') AS typed;
SELECT deidentify('Call Kathryn Herrera at (555) 123-4567 about MRN-580486.') AS full_entity;
SELECT sanitize('Seen at St. Mary''s Hospital.', 'deidentify', '{"strategy": "named_placeholder", "p": 0.8}') -> 'cost' -> 'guarantee' AS named_guarantee;
SELECT deidentify_epsilon('full_entity', 1) AS p_one, deidentify_epsilon('redact', 0.5) AS redact_half,
       deidentify_epsilon('named_placeholder', 0) AS p_zero, round(deidentify_epsilon('full_entity', 0.9)::numeric, 3) AS full_entity_p09;
SELECT deidentify('Call Kathryn Herrera at (555) 123-4567.', p => 0) AS p_zero_unchanged;
SELECT deidentify('x', 'mask');
\echo :LAST_ERROR_SQLSTATE

-- NDD with the committed masked LM: 0 for equal texts; the papers' LOC pair.
SELECT ndd('The patient was seen on Monday.', 'The patient was seen on Monday.') AS same;
SELECT round(ndd('Masao Yoshikawa was defeated in the match in Hokkaido .',
                 'Masao Yoshikawa was defeated in the match in Moscow .')::numeric, 3) AS fitting,
       round(ndd('Masao Yoshikawa was defeated in the match in Hokkaido .',
                 'Masao Yoshikawa was defeated in the match in 1926 .')::numeric, 3) AS unfitting,
       round(ndd('Masao Yoshikawa was defeated in the match in Hokkaido .',
                 'Masao Yoshikawa was defeated in the match in Moscow .', 0.5, 'hellinger')::numeric, 3) AS hellinger;
SELECT ndd('alpha beta', 'gamma delta');
\echo :LAST_ERROR_SQLSTATE
SELECT ndd_distort('Call Kathryn Herrera at (555) 123-4567 about MRN-580486.') AS substitutive;
SELECT ndd_distort('Kathryn Herrera was admitted on Monday.', 'generative', 4) AS generative;
SELECT sanitize('Seen by Kathryn Herrera.', 'ndd', '{"candidates": 2}') -> 'cost' -> 'guarantee' AS ndd_guarantee;
SELECT ndd_distort('x', candidates => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT ndd_distort(NULL) IS NULL AS ndd_null;

-- Each dedicated function with only its required arguments is its mechanism
-- at the spec's defaults (sanitize with only the required parameters): the
-- functions' SQL defaults are core's. Parameters feed the seeded stream, so
-- any default that differs changes the text.
SELECT (sanitize('The patient was admitted with chest pain and a mild fever.', 'santext_plus', '{"eps": 3}') ->> 'text')
     = santext_plus('The patient was admitted with chest pain and a mild fever.', 3) AS santext_plus_defaults;
SELECT (sanitize('The doctor saw the patient and the doctor left.', 'custext', '{"eps": 2}') ->> 'text')
     = custext('The doctor saw the patient and the doctor left.', 2) AS custext_defaults;
SELECT (sanitize('Call Kathryn Herrera at (555) 123-4567 about MRN-580486.', 'deidentify', '{}') ->> 'text')
     = deidentify('Call Kathryn Herrera at (555) 123-4567 about MRN-580486.') AS deidentify_defaults;
SELECT (sanitize('Call Kathryn Herrera at (555) 123-4567 about MRN-580486.', 'ndd', '{}') ->> 'text')
     = ndd_distort('Call Kathryn Herrera at (555) 123-4567 about MRN-580486.') AS ndd_distort_defaults;

-- NULL in, NULL out.
SELECT santext(NULL, 3) IS NULL AS n1, santext('x', NULL) IS NULL AS n2,
       santext_plus(NULL, 3) IS NULL AS n3, sanitize('x', 'santext', NULL) IS NULL AS n4;

-- Odd inputs: a result, never a crash.
SELECT santext('', 3) AS empty, santext('?!', 3) AS punctuation;
SELECT length(santext('Пациент жалуется на боль 🙂', 3)) > 0 AS cyrillic_and_emoji;
SELECT length(santext(repeat('fever and cough. ', 600000), 3)) > 9000000 AS ten_megabytes;
SELECT count(*) FROM detect_pii(repeat('call 555-123-4567 ', 100000));
\echo :LAST_ERROR_SQLSTATE

-- Errors carry SQLSTATEs: 22023 invalid parameter, 54000 too large, 58P01 missing assets.
SELECT santext('x', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT santext('x', -2);
\echo :LAST_ERROR_SQLSTATE
SELECT santext('x', 'NaN');
\echo :LAST_ERROR_SQLSTATE
SELECT santext('x', 'Infinity');
\echo :LAST_ERROR_SQLSTATE
SELECT santext_plus('x', 1, p => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT santext_plus('x', 1, w => 1.5);
\echo :LAST_ERROR_SQLSTATE
SELECT santext_plus('x', 1, w => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT santext('x', 1, embedding => 'word2vec');
\echo :LAST_ERROR_SQLSTATE
SELECT sanitize('x', 'custext9', '{"eps": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT sanitize('x', 'santext', '{"eps": "three"}');
\echo :LAST_ERROR_SQLSTATE
SELECT custext('x', 1, k => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT custext('x', 1, level => 'row');
\echo :LAST_ERROR_SQLSTATE
SET dptext.key = 'regression dataset-level key';
SELECT custext('fever and fever', 1, level => 'dataset') AS dataset_level_with_a_key;
RESET dptext.key;
SELECT custext('fever', 1, level => 'dataset');
\echo :LAST_ERROR_SQLSTATE
SET dptext.max_input_bytes = 16;
SELECT santext('this text is longer than sixteen bytes', 1);
\echo :LAST_ERROR_SQLSTATE
RESET dptext.max_input_bytes;
SET dptext.assets_dir = '/nonexistent/dptext';
SELECT santext('x', 1);
\echo :LAST_ERROR_SQLSTATE
RESET dptext.assets_dir;

-- Superuser-only settings and the hidden key.
SET dptext.key = 'regression secret';
SHOW dptext.key;
SELECT setting FROM pg_settings WHERE name = 'dptext.key';
DROP ROLE IF EXISTS dptext_regress_analyst;
CREATE ROLE dptext_regress_analyst;
SET ROLE dptext_regress_analyst;
SET dptext.seed = 1;
\echo :LAST_ERROR_SQLSTATE
SHOW dptext.key;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE dptext_regress_analyst;
RESET dptext.key;

-- Parallel workers compute exactly what a serial plan computes.
CREATE TABLE regress_notes AS
  SELECT i AS id, 'Patient ' || i || ' reports fever and cough since monday.' AS note
  FROM generate_series(1, 20000) i;
ANALYZE regress_notes;
SET dptext.seed = 5;
SET max_parallel_workers_per_gather = 0;
CREATE TABLE serial_out AS SELECT id, santext(note, 3) AS s FROM regress_notes;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF) SELECT id, santext(note, 3) AS s FROM regress_notes;
CREATE TABLE parallel_out AS SELECT id, santext(note, 3) AS s FROM regress_notes;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.s = b.s) AS equal
  FROM serial_out a JOIN parallel_out b USING (id);
DROP TABLE regress_notes, serial_out, parallel_out;

-- Nobody but the owner may call the functions until granted: with a key
-- set, calling santext on a guess and comparing with a view would test it.
CREATE ROLE dptext_regress_reader;
SET ROLE dptext_regress_reader;
SELECT santext('x', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT dptext_info();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT EXECUTE ON FUNCTION santext(text, float8, text, text) TO dptext_regress_reader;
SET ROLE dptext_regress_reader;
SELECT santext('', 1) AS granted;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION santext(text, float8, text, text) FROM dptext_regress_reader;
DROP ROLE dptext_regress_reader;

-- A statement timeout stops a long call with 57014 (before: 33 s late for 100 KB).
-- 2 MB of distinct words: rows with the same tokens run once, so a repeated
-- character would finish within the timeout.
SET dptext.max_detect_bytes = 16000000;
SET statement_timeout = '1s';
SELECT count(*) FROM detect_pii((SELECT string_agg(md5(i::text), ' ') FROM generate_series(1, 60000) i));
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
RESET dptext.max_detect_bytes;
-- jsonb parameters beyond float range are invalid values, named.
SELECT sanitize('x', 'santext', '{"eps": 1e400}');
\echo :LAST_ERROR_SQLSTATE
