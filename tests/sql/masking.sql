-- Masking at the source: a role labelled MASKED reads labelled columns
-- only through their rules, keyed; the owner reads raw values.
-- (The leak battery, tests/leak_battery.py, attacks every channel; this
-- file pins the user-facing surface: outputs, refusals, SQLSTATEs.)
SET client_min_messages = warning;
CREATE EXTENSION dptext;
CREATE TABLE notes (id int PRIMARY KEY, patient varchar(60), note text, visits int);
INSERT INTO notes VALUES
  (1, 'Zebediah Quincewhistle', 'Seen by Dr. Pennyfeather for chest pain.', 3),
  (2, 'Octavia Brambleworth', 'Follow-up call about the results.', 1);
SECURITY LABEL FOR dptext ON COLUMN notes.note IS 'MASKED WITH santext(eps => 3)';
SECURITY LABEL FOR dptext ON COLUMN notes.patient IS 'MASKED WITH deidentify(strategy => typed_placeholder)';
DROP ROLE IF EXISTS regress_masked;
CREATE ROLE regress_masked;
SECURITY LABEL FOR dptext ON ROLE regress_masked IS 'MASKED';
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON notes TO regress_masked;

-- The owner reads raw values.
SELECT id, patient, note, visits FROM notes ORDER BY id;

-- A masked current role without a key is refused, not served fresh draws.
SET ROLE regress_masked;
SELECT note FROM notes;
\echo :LAST_ERROR_SQLSTATE
-- What does not read a labelled column runs as usual.
SELECT id, visits FROM notes ORDER BY id;
RESET ROLE;

-- Under a key every read of a labelled column goes through its rule.
SET dptext.key = 'the regression key, not a secret';
SET ROLE regress_masked;
SELECT dptext.session_masking() - 'version' - 'key_id' AS session;
SELECT id, patient, note, visits FROM notes ORDER BY id;
-- The same value gives the same text, in every query.
SELECT count(DISTINCT note) AS distinct_outputs FROM notes, generate_series(1, 20) WHERE id = 1;
-- Filters, functions and whole rows compute on sanitized text only.
SELECT count(*) AS naming_pennyfeather FROM notes WHERE note LIKE '%Pennyfeather%';
SELECT upper(patient) AS patient FROM notes ORDER BY id;
SELECT n FROM notes n ORDER BY id;
COPY notes TO STDOUT;
-- Writes, label changes and dptext settings are refused (42501).
UPDATE notes SET visits = 0;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO notes VALUES (3, 'x', 'y', 0);
\echo :LAST_ERROR_SQLSTATE
TRUNCATE notes;
\echo :LAST_ERROR_SQLSTATE
SET dptext.key = '';
\echo :LAST_ERROR_SQLSTATE
SELECT dptext.mask('Zebediah Quincewhistle', 'santext', '{"eps": 3.0, "embedding": "glove"}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- Statistics of labelled columns are hidden from masked sessions.
ANALYZE notes;
SET ROLE regress_masked;
SELECT attname, most_common_vals IS NOT NULL OR histogram_bounds IS NOT NULL AS has_values
  FROM pg_stats WHERE tablename = 'notes' ORDER BY attname;
RESET ROLE;
SELECT attname, most_common_vals IS NOT NULL OR histogram_bounds IS NOT NULL AS has_values
  FROM pg_stats WHERE tablename = 'notes' ORDER BY attname;

-- A materialized view stores raw values: its columns are served as the
-- columns they were computed from (own label, else the copied column's
-- rule, else as they are) ...
CREATE MATERIALIZED VIEW notes_copy AS SELECT id, patient, note, visits * 2 AS twice FROM notes;
SECURITY LABEL FOR dptext ON COLUMN notes_copy.note IS 'MASKED WITH santext(eps => 1)';
-- ... and when its query reads a labelled column in a filter or an
-- expression, only its masked columns may be read.
CREATE MATERIALIZED VIEW notes_filtered AS SELECT id, upper(note) AS loud FROM notes WHERE note LIKE '%chest%';
GRANT SELECT ON notes_copy, notes_filtered TO regress_masked;
SET ROLE regress_masked;
SELECT id, patient, note, twice FROM notes_copy ORDER BY id;
SELECT count(*) FROM notes_filtered;
SELECT id FROM notes_filtered;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

DROP MATERIALIZED VIEW notes_copy, notes_filtered;

-- GROUPED BY: the date shift is fixed per patient, read from another
-- column of the same row (any type), for masked reads and sanitized views.
CREATE TABLE visits (id int PRIMARY KEY, patient_id int, note text);
INSERT INTO visits VALUES
  (1, 7, 'Seen on 03/14/2023 for cough.'),
  (2, 7, 'Seen on 03/14/2023 again, stable.'),
  (3, 8, 'Seen on 03/14/2023 for cough.'),
  (4, NULL, 'Seen on 03/14/2023, no id.');
SECURITY LABEL FOR dptext ON COLUMN visits.note IS 'MASKED WITH deidentify(operators => ''DATE:shift'') GROUPED BY nope';
\echo :LAST_ERROR_SQLSTATE
SECURITY LABEL FOR dptext ON COLUMN visits.note IS 'MASKED WITH deidentify(operators => ''DATE:shift'') GROUPED BY note';
\echo :LAST_ERROR_SQLSTATE
SECURITY LABEL FOR dptext ON COLUMN visits.note IS 'MASKED WITH santext(eps => 3) GROUPED BY patient_id';
\echo :LAST_ERROR_SQLSTATE
SECURITY LABEL FOR dptext ON COLUMN visits.note IS 'MASKED WITH deidentify(operators => ''DATE:shift'') GROUPED BY patient_id';
SELECT column_name, mechanism, group_column, label FROM dptext.rules WHERE table_name = 'visits';
GRANT SELECT ON visits TO regress_masked;
SET ROLE regress_masked;
-- One patient's notes move alike; the raw date never comes back.
WITH d AS (SELECT id, substring(note FROM '[0-9]+/[0-9]+/[0-9]+') AS date FROM visits)
SELECT (SELECT date FROM d WHERE id = 1) = (SELECT date FROM d WHERE id = 2) AS same_patient_same_shift,
       (SELECT date FROM d WHERE id = 1) <> (SELECT date FROM d WHERE id = 3) AS other_patient_other_shift,
       (SELECT count(*) FROM d WHERE date = '03/14/2023') AS raw_dates,
       (SELECT count(*) FROM d WHERE date IS NULL) AS lost;
-- The grouped form cannot be called directly either.
SELECT dptext.mask('Seen on 03/14/2023', 'deidentify', '{"operators": "DATE:shift"}', '7');
\echo :LAST_ERROR_SQLSTATE
-- Under another key: other shifts, still one per patient.
RESET ROLE;
SET dptext.key = 'another regression key, not a secret';
SET ROLE regress_masked;
WITH d AS (SELECT id, substring(note FROM '[0-9]+/[0-9]+/[0-9]+') AS date FROM visits)
SELECT (SELECT date FROM d WHERE id = 1) = (SELECT date FROM d WHERE id = 2) AS same_patient_same_shift;
RESET ROLE;
-- A sanitized view applies the same rule with the same grouping.
SELECT dptext.create_sanitized_view('visits', 'visits_safe') IS NOT NULL AS built;
SET ROLE regress_masked;
CREATE TEMP TABLE masked_read AS SELECT id, note FROM visits;
RESET ROLE;
SELECT bool_and(v.note = m.note) AS view_equals_masked_read
  FROM visits_safe v JOIN masked_read m USING (id);
DROP MATERIALIZED VIEW visits_safe;
-- A materialized view cannot serve a grouped rule from stored rows: one a
-- masked session refreshed holds shifted dates, which a second shift by the
-- same days would reveal (its difference with the table's masked read).
CREATE MATERIALIZED VIEW visits_copy AS SELECT id, patient_id, note FROM visits;
CREATE MATERIALIZED VIEW visits_notes AS SELECT id, note FROM visits;
GRANT SELECT ON visits_copy, visits_notes TO regress_masked;
SET ROLE regress_masked;
SELECT note FROM visits_copy;
\echo :LAST_ERROR_SQLSTATE
SELECT note FROM visits_notes;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SECURITY LABEL FOR dptext ON COLUMN visits_copy.note IS 'MASKED WITH deidentify(operators => ''DATE:shift'') GROUPED BY patient_id';
\echo :LAST_ERROR_SQLSTATE
DROP MATERIALIZED VIEW visits_copy, visits_notes;
-- The grouping column's privilege is checked: a role that may read the
-- note but not the patient id learns nothing of the id.
REVOKE SELECT ON visits FROM regress_masked;
GRANT SELECT (id, note) ON visits TO regress_masked;
SET ROLE regress_masked;
SELECT id, note FROM visits;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT SELECT ON visits TO regress_masked;
-- A grouping column whose text depends on the session's settings would
-- give one row many shifts (DateStyle, TimeZone): refused when the label
-- is set and, after ALTER COLUMN ... TYPE, when read.
ALTER TABLE visits ADD COLUMN seen timestamptz;
SECURITY LABEL FOR dptext ON COLUMN visits.note IS 'MASKED WITH deidentify(operators => ''DATE:shift'') GROUPED BY seen';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE visits ALTER COLUMN patient_id TYPE float8;
SET ROLE regress_masked;
SELECT note FROM visits;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
ALTER TABLE visits ALTER COLUMN patient_id TYPE int;
-- Renaming the labelled column to the grouping column's name fails closed.
ALTER TABLE visits RENAME patient_id TO pid;
ALTER TABLE visits RENAME note TO patient_id;
SET ROLE regress_masked;
SELECT patient_id FROM visits;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP TABLE visits, masked_read;
DROP TABLE notes;
DROP ROLE regress_masked;
