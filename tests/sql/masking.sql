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
-- expression, nothing may be read, count(*) included (which rows it
-- stores, and their order, followed raw values).
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

-- Labels on a view's columns cannot be enforced (PostgreSQL replaces the
-- view by its query before planning): refused when set.
CREATE VIEW notes_v AS SELECT id, note FROM notes;
SECURITY LABEL FOR dptext ON COLUMN notes_v.note IS 'MASKED WITH santext(eps => 3)';
\echo :LAST_ERROR_SQLSTATE
-- Reads through the view are masked by the table's label.
GRANT SELECT ON notes_v TO regress_masked;
SET ROLE regress_masked;
SELECT (SELECT note FROM notes_v WHERE id = 1) = (SELECT note FROM notes WHERE id = 1) AS same_masked_text,
       (SELECT note FROM notes_v WHERE id = 1) LIKE '%Pennyfeather%' AS raw;
RESET ROLE;
-- A label on a view's column from before that was refused (planted here
-- in the catalog) fails closed: reads of the view are refused.
SET allow_system_table_mods = on;
INSERT INTO pg_seclabel VALUES ('notes_v'::regclass, 'pg_class'::regclass, 2, 'dptext', 'MASKED WITH santext(eps => 3)');
RESET allow_system_table_mods;
-- (A new session: this one cached the view's policy.)
\c dptext_regress
SET client_min_messages = warning;
SET dptext.key = 'the regression key, not a secret';
SET ROLE regress_masked;
SELECT id FROM notes_v;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP VIEW notes_v;

-- Multiple inheritance: a child's row is read through each of its
-- parents; the label one parent gives it protects the others too.
CREATE TABLE mi_p1 (note text);
CREATE TABLE mi_p2 (note text);
CREATE TABLE mi_c () INHERITS (mi_p1, mi_p2);
SECURITY LABEL FOR dptext ON COLUMN mi_p1.note IS 'MASKED WITH santext(eps => 3)';
INSERT INTO mi_c VALUES ('Inherited secret Zebediah Quincewhistle');
GRANT SELECT ON mi_p1, mi_p2, mi_c TO regress_masked;
SET ROLE regress_masked;
SELECT (SELECT note FROM mi_p2) = (SELECT note FROM mi_p1) AS same_masked_text,
       (SELECT note FROM mi_p2) LIKE '%Quincewhistle%' AS raw;
RESET ROLE;
ANALYZE mi_p2;
SET ROLE regress_masked;
SELECT count(*) AS statistics_rows FROM pg_stats
 WHERE tablename = 'mi_p2' AND attname = 'note' AND (most_common_vals IS NOT NULL OR histogram_bounds IS NOT NULL);
RESET ROLE;
DROP TABLE mi_c, mi_p1, mi_p2;

-- Only superusers and members of dptext.label_admins may set or remove
-- labels: owning a table is not enough, or a role could label a table of
-- guesses with a protected column's rule and let masked sessions compare
-- the (keyed, so equal for equal values) masked texts.
DROP ROLE IF EXISTS regress_owner;
CREATE ROLE regress_owner;
DROP ROLE IF EXISTS regress_labeller;
CREATE ROLE regress_labeller;
GRANT CREATE ON SCHEMA public TO regress_owner;
SET ROLE regress_owner;
CREATE TABLE guesses (g text, g_plain text);
INSERT INTO guesses VALUES ('Zebediah Quincewhistle', 'Zebediah Quincewhistle');
SECURITY LABEL FOR dptext ON COLUMN guesses.g IS 'MASKED WITH deidentify(strategy => typed_placeholder)';
\echo :LAST_ERROR_SQLSTATE
GRANT SELECT ON guesses TO regress_masked;
RESET ROLE;
SET ROLE regress_masked;
SELECT count(*) AS matches FROM notes n JOIN guesses g ON n.patient = g.g;
RESET ROLE;
-- A label admin may label, and remove labels.
GRANT regress_labeller TO regress_owner;
SET dptext.label_admins = 'nobody_here, regress_labeller';
SET ROLE regress_owner;
SECURITY LABEL FOR dptext ON COLUMN guesses.g IS 'MASKED WITH santext(eps => 3)';
SECURITY LABEL FOR dptext ON COLUMN guesses.g IS NULL;
RESET ROLE;
RESET dptext.label_admins;
-- Nor may a role that can create roles unlabel a masked one.
ALTER ROLE regress_owner CREATEROLE;
SET ROLE regress_owner;
SECURITY LABEL FOR dptext ON ROLE regress_masked IS NULL;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT role_name FROM dptext.masked_roles WHERE role_name = 'regress_masked';
DROP TABLE guesses;
REVOKE CREATE ON SCHEMA public FROM regress_owner;
DROP ROLE regress_owner;
DROP ROLE regress_labeller;

-- A sanitized copy built before a column was labelled holds that column's
-- raw values: masked sessions read it through the source's rule now.
CREATE TABLE sv_src (id int PRIMARY KEY, note text, diag text);
INSERT INTO sv_src VALUES (1, 'note text', 'Late-labelled diagnosis for Quincewhistle');
SECURITY LABEL FOR dptext ON COLUMN sv_src.note IS 'MASKED WITH santext(eps => 3)';
SELECT dptext.create_sanitized_view('sv_src', 'sv_safe') IS NOT NULL AS built;
SECURITY LABEL FOR dptext ON COLUMN sv_src.diag IS 'MASKED WITH santext(eps => 3)';
GRANT SELECT ON sv_src, sv_safe TO regress_masked;
SET ROLE regress_masked;
SELECT (SELECT diag FROM sv_safe) = (SELECT diag FROM sv_src) AS same_masked_text,
       (SELECT diag FROM sv_safe) LIKE '%Quincewhistle%' AS raw,
       (SELECT id FROM sv_safe) AS id;
RESET ROLE;
-- Renaming the source column does not unmask the copy: a copied column
-- that matches no source column is refused.
ALTER TABLE sv_src RENAME COLUMN diag TO details;
SET ROLE regress_masked;
SELECT (SELECT diag FROM sv_safe) LIKE '%Quincewhistle%' AS raw_after_rename;
RESET ROLE;
-- Provenance is trusted only for the relations it names: a row naming
-- another relation's OID (a dump restored elsewhere keeps the old OIDs)
-- serves nothing raw.
CREATE MATERIALIZED VIEW sv_other AS SELECT id, note FROM sv_src;
GRANT SELECT ON sv_other TO regress_masked;
INSERT INTO dptext.provenance (build, event, source_oid, source_schema, source_table, target_oid,
       target_name, materialized, column_name, mechanism, params, guarantee, randomness, assets)
VALUES (999999, 'create', 'sv_src'::regclass, 'public', 'sv_src', 'sv_other'::regclass,
        'public.somewhere_else', true, 'note', 'santext', '{}', '{}', 'keyed', '{}');
SET ROLE regress_masked;
SELECT note LIKE '%note text%' AS raw_by_a_planted_row FROM sv_other;
RESET ROLE;
DELETE FROM dptext.provenance WHERE build = 999999;
DROP MATERIALIZED VIEW sv_other;
DROP MATERIALIZED VIEW sv_safe;
DROP TABLE sv_src;

-- A labelled column whose type was changed since the label was set is
-- refused, not handed to the rule as text.
CREATE TABLE ty (id int, note text);
INSERT INTO ty VALUES (1, 'typed note');
SECURITY LABEL FOR dptext ON COLUMN ty.note IS 'MASKED WITH santext(eps => 3)';
ALTER TABLE ty ALTER note TYPE bytea USING convert_to(note, 'UTF8');
GRANT SELECT ON ty TO regress_masked;
SET ROLE regress_masked;
SELECT note FROM ty;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP TABLE ty;

-- A member of a masked role reads with its grants, so it is masked too
-- (a role that may create roles could otherwise make one and read raw).
DROP ROLE IF EXISTS regress_member;
CREATE ROLE regress_member IN ROLE regress_masked;
SET ROLE regress_member;
SELECT (dptext.session_masking() ->> 'masked') AS member_masked;
SELECT note LIKE '%Pennyfeather%' AS raw FROM notes WHERE id = 1;
RESET ROLE;
DROP ROLE regress_member;

-- Where a row is stored (ctid) follows from the lengths of the rows before
-- it, labelled values included: refused on labelled tables, in any clause.
SET ROLE regress_masked;
SELECT ctid FROM notes;
\echo :LAST_ERROR_SQLSTATE
SELECT id FROM notes WHERE ctid > '(0,1)';
\echo :LAST_ERROR_SQLSTATE
SELECT id, tableoid::regclass FROM notes ORDER BY id;
RESET ROLE;
DROP TABLE notes;

-- A database whose encoding is not UTF8: masked reads are refused when
-- planned, whatever the rows hold (converting row by row would fail only
-- on rows with non-ASCII bytes: a bit of each raw value).
DROP DATABASE IF EXISTS dptext_regress_latin1;
CREATE DATABASE dptext_regress_latin1 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0;
\c dptext_regress_latin1
SET client_min_messages = warning;
CREATE EXTENSION dptext;
CREATE TABLE l1 (id int, note text);
INSERT INTO l1 VALUES (1, 'plain ascii'), (2, 'café au lait');
SECURITY LABEL FOR dptext ON COLUMN l1.note IS 'MASKED WITH santext(eps => 3)';
GRANT SELECT ON l1 TO regress_masked;
SET dptext.key = 'the regression key, not a secret';
SET ROLE regress_masked;
SELECT note FROM l1 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
SELECT note FROM l1 WHERE id = 2;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
\c dptext_regress
DROP DATABASE dptext_regress_latin1;
DROP ROLE regress_masked;
