-- Regression test of vocabularies drawn from a column with differential
-- privacy (docs/vocabulary.md): build, store, record, use, errors. Run by
-- scripts/test.sh; expected output in tests/expected/vocabulary.out.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS dptext CASCADE;
CREATE EXTENSION dptext;
SET dptext.seed = 7;
CREATE TABLE notes (id int PRIMARY KEY, note text);
-- 2,000 values over four notes (each word in 500 values or more); one
-- value also holds a word no other value has.
INSERT INTO notes
  SELECT g, (ARRAY['the patient reported chest pain and fever', 'patient denies fever, reports cough',
                   'chest x-ray shows no acute disease', 'the patient was admitted for pneumonia'])[1 + g % 4]
            || CASE WHEN g = 1 THEN ' wombat' ELSE '' END
    FROM generate_series(1, 2000) g;
-- Build: the summary's counts are exact, for the builder only.
SELECT s ->> 'name' AS name, (s ->> 'words')::int BETWEEN 10 AND 30 AS words_ok,
       s ->> 'values' AS n_values, s ->> 'noise' AS noise
  FROM dptext.build_vocabulary('notes', 'note', 1.0, 1e-5, 'notes_vocab', 16) s;
-- Stored with its release: frequent words in, the lone word out.
SELECT name, source, column_name, eps, delta, noise, max_words_per_value AS k,
       'patient' = ANY (words) AS patient, 'wombat' = ANY (words) AS wombat
  FROM dptext.vocabularies;
-- Recorded once against the source column.
SELECT event, target_name, column_name, mechanism, guarantee ->> 'kind' AS kind, randomness
  FROM dptext.provenance ORDER BY id;
SELECT source_table, column_name, guarantee, releases, eps_total, delta_total, unbounded
  FROM dptext.budget ORDER BY guarantee;
-- Errors.
SELECT dptext.build_vocabulary('notes', 'note', 1.0, 1e-5, 'notes_vocab');
\echo :LAST_ERROR_SQLSTATE
SELECT dptext.build_vocabulary('notes', 'nope', 1.0, 1e-5, 'other');
\echo :LAST_ERROR_SQLSTATE
SELECT dptext.build_vocabulary('notes', 'note', 0, 1e-5, 'other');
\echo :LAST_ERROR_SQLSTATE
SELECT dptext.build_vocabulary('notes', 'note', 1.0, 0.7, 'other');
\echo :LAST_ERROR_SQLSTATE
SELECT dptext.build_vocabulary('notes', 'note', 1.0, 1e-5, 'other', 16, 'poisson');
\echo :LAST_ERROR_SQLSTATE
SELECT dptext.build_vocabulary('notes', 'note', 1.0, 1e-5, '../other');
\echo :LAST_ERROR_SQLSTATE
SELECT sanitize('fever', 'santext', '{"eps": 3, "vocabulary": "nope"}');
\echo :LAST_ERROR_SQLSTATE
SELECT sanitize('fever', 'santext', '{"eps": 3, "vocabulary": "notes_vocab", "embedding": "wordpiece"}');
\echo :LAST_ERROR_SQLSTATE
-- Every word mechanism draws only words of the vocabulary, and its cost names it.
SELECT m.mechanism, bool_and(w = ANY (v.words)) AS all_in_vocabulary
  FROM (VALUES ('santext', '{"eps": 3, "vocabulary": "notes_vocab"}'::jsonb),
               ('santext_plus', '{"eps": 3, "p": 1, "vocabulary": "notes_vocab"}'),
               ('custext', '{"eps": 2, "k": 5, "keep_stopwords": false, "vocabulary": "notes_vocab"}')) m(mechanism, params),
       notes n, dptext.vocabularies v,
       LATERAL pg_catalog.regexp_split_to_table(lower(sanitize(n.note || ' Smith in Paris', m.mechanism, m.params) ->> 'text'), '[^[:alnum:]]+') w
 WHERE n.id <= 40 AND w <> ''
 GROUP BY m.mechanism ORDER BY m.mechanism;
SELECT c ->> 'mechanism' AS mechanism, c -> 'vocabulary' ->> 'name' AS vocabulary,
       (c -> 'vocabulary' ->> 'eps')::float8 AS eps, (c -> 'vocabulary' ->> 'delta')::float8 AS delta
  FROM (SELECT sanitize('fever', 'santext', '{"eps": 3, "vocabulary": "notes_vocab"}') -> 'cost' AS c) x;
SELECT sanitize('fever', 'santext', '{"eps": 3}') -> 'cost' ? 'vocabulary' AS without_vocabulary;
-- The dedicated functions take the vocabulary by name and give what
-- sanitize() gives with it.
SELECT santext(n.note, 3, vocabulary => 'notes_vocab')
         = sanitize(n.note, 'santext', '{"eps": 3, "vocabulary": "notes_vocab"}') ->> 'text' AS santext_same,
       santext_plus(n.note, 3, p => 1, vocabulary => 'notes_vocab')
         = sanitize(n.note, 'santext_plus', '{"eps": 3, "p": 1, "vocabulary": "notes_vocab"}') ->> 'text' AS santext_plus_same,
       custext(n.note, 2, k => 5, vocabulary => 'notes_vocab')
         = sanitize(n.note, 'custext', '{"eps": 2, "k": 5, "vocabulary": "notes_vocab"}') ->> 'text' AS custext_same,
       santext(n.note, 3, vocabulary => 'notes_vocab') <> santext(n.note, 3) AS differs_from_default
  FROM notes n WHERE n.id = 3;
SELECT santext('fever', 3, vocabulary => '') = santext('fever', 3) AS empty_is_default,
       santext(NULL, 3, vocabulary => 'notes_vocab') IS NULL AS strict;
SELECT santext('fever', 3, vocabulary => 'nope');
\echo :LAST_ERROR_SQLSTATE
SELECT custext('fever', 2, embedding => 'wordpiece', vocabulary => 'notes_vocab');
\echo :LAST_ERROR_SQLSTATE
-- A rule with a vocabulary: the view records it in provenance; the budget
-- keeps the vocabulary's release as its own line, spent once.
RESET dptext.seed;
SET dptext.key = 'regression key, not a real secret';
SECURITY LABEL FOR dptext ON COLUMN notes.note IS 'MASKED WITH santext(eps => 3, vocabulary => notes_vocab)';
SELECT column_name, params ->> 'vocabulary' AS vocabulary FROM dptext.rules;
SELECT dptext.create_sanitized_view('notes', 'notes_safe') IS NOT NULL AS built;
SELECT mechanism, params ->> 'vocabulary' AS vocabulary FROM dptext.provenance ORDER BY id;
SELECT source_table, column_name, guarantee, releases, eps_total, delta_total
  FROM dptext.budget ORDER BY guarantee;
