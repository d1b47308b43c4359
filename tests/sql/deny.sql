-- Deny by default: under dptext.deny_unlabelled_text a masked role may not
-- read a text-like column that has neither a rule nor an ALLOW label, in
-- any clause and through any path (views, joins, whole rows, subqueries);
-- labelled and ALLOW columns, and other types, read as usual.
SET client_min_messages = warning;
CREATE EXTENSION dptext;
CREATE DOMAIN short_text AS varchar(40);
CREATE TABLE visits (
  id int PRIMARY KEY,
  note text,           -- a rule
  ward text,           -- ALLOW
  comment text,        -- nothing: raw unless denied
  tags text[],         -- nothing, an array of text
  extra jsonb,         -- nothing, json
  code short_text,     -- nothing, a domain over varchar
  seen date);
INSERT INTO visits VALUES
  (1, 'Seen by Dr. Pennyfeather.', 'north', 'Called Quincewhistle at home', '{urgent}', '{"who": "Brambleworth"}', 'QW-1', '2026-01-02'),
  (2, 'Follow-up call.', 'south', 'no answer', '{}', '{}', 'QW-2', '2026-02-03');
CREATE VIEW visit_comments AS SELECT id, comment FROM visits;
SECURITY LABEL FOR dptext ON COLUMN visits.note IS 'MASKED WITH santext(eps => 3)';
SECURITY LABEL FOR dptext ON COLUMN visits.ward IS 'ALLOW';
-- ALLOW is not a rule: dptext.rules lists only the rule.
SELECT column_name, mechanism FROM dptext.rules ORDER BY column_name;
-- ALLOW on a column of any type; a misspelling is an error.
SECURITY LABEL FOR dptext ON COLUMN visits.seen IS 'allow';
SECURITY LABEL FOR dptext ON COLUMN visits.seen IS 'ALLOWED';
SECURITY LABEL FOR dptext ON COLUMN visits.seen IS NULL;
DROP ROLE IF EXISTS regress_masked;
CREATE ROLE regress_masked;
SECURITY LABEL FOR dptext ON ROLE regress_masked IS 'MASKED';
GRANT SELECT ON visits, visit_comments TO regress_masked;
SET dptext.key = 'the regression key, not a secret';

-- What a privacy officer reviews: the unlabelled text columns and the
-- masked roles that can read them.
SELECT table_name, column_name, type, masked_readers
  FROM dptext.unlabelled_text_columns WHERE table_name LIKE 'visit%' ORDER BY 1, 2;

-- Off (the default): unlabelled columns read raw, as before.
SET ROLE regress_masked;
SELECT id, comment FROM visits ORDER BY id;
RESET ROLE;

-- On (an administrator's setting; per database or role in production).
SET dptext.deny_unlabelled_text = on;
SET ROLE regress_masked;
SHOW dptext.deny_unlabelled_text;
-- Labelled, ALLOW and non-text columns read as usual.
SELECT id, ward, seen, length(note) > 0 AS masked_note FROM visits ORDER BY id;
SELECT count(*) FROM visits;
-- Every read of an unlabelled text column is refused, whatever the clause.
SELECT comment FROM visits;
\echo :LAST_ERROR_SQLSTATE
SELECT id FROM visits WHERE comment LIKE '%Quince%';
\echo :LAST_ERROR_SQLSTATE
SELECT id FROM visits ORDER BY comment;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM visits GROUP BY length(comment);
\echo :LAST_ERROR_SQLSTATE
SELECT v FROM visits v;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM visits;
\echo :LAST_ERROR_SQLSTATE
SELECT tags FROM visits;
\echo :LAST_ERROR_SQLSTATE
SELECT extra ->> 'who' FROM visits;
\echo :LAST_ERROR_SQLSTATE
SELECT code FROM visits;
\echo :LAST_ERROR_SQLSTATE
SELECT comment FROM visit_comments;
\echo :LAST_ERROR_SQLSTATE
SELECT id FROM visits a JOIN (SELECT id AS i, comment FROM visits) b ON b.i = a.id;
\echo :LAST_ERROR_SQLSTATE
SELECT id FROM visits WHERE EXISTS (SELECT 1 FROM visits w WHERE w.comment = 'no answer' AND w.id = visits.id);
\echo :LAST_ERROR_SQLSTATE
-- The catalogs and the extension's own views stay readable.
SELECT count(*) > 0 AS catalogs FROM pg_class WHERE relname = 'visits';
SELECT count(*) AS rules FROM dptext.rules WHERE table_name = 'visits';
-- A masked session cannot turn it off.
SET dptext.deny_unlabelled_text = off;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- Labelling the column lets masked roles read it through its rule.
SECURITY LABEL FOR dptext ON COLUMN visits.comment IS 'MASKED WITH deidentify(strategy => typed_placeholder)';
SET ROLE regress_masked;
SELECT id, comment FROM visits ORDER BY id;
RESET ROLE;
-- A MASKED WITH rule wins over ALLOW anywhere in an inheritance family.
CREATE TABLE parent_notes (id int, body text);
CREATE TABLE child_notes () INHERITS (parent_notes);
INSERT INTO child_notes VALUES (1, 'Quincewhistle called');
SECURITY LABEL FOR dptext ON COLUMN parent_notes.body IS 'MASKED WITH deidentify(whole => true, strategy => typed_placeholder)';
SECURITY LABEL FOR dptext ON COLUMN child_notes.body IS 'ALLOW';
GRANT SELECT ON parent_notes, child_notes TO regress_masked;
SET ROLE regress_masked;
SELECT body FROM child_notes;
RESET ROLE;

-- An ALLOW on one partition says nothing of its siblings or its parent.
CREATE TABLE parted (id int, region text, memo text) PARTITION BY LIST (region);
CREATE TABLE parted_pub PARTITION OF parted FOR VALUES IN ('public');
CREATE TABLE parted_sec PARTITION OF parted FOR VALUES IN ('secret');
INSERT INTO parted VALUES (1, 'public', 'Nothing here'), (2, 'secret', 'Quincewhistle diagnosis');
SECURITY LABEL FOR dptext ON COLUMN parted_pub.memo IS 'ALLOW';
SECURITY LABEL FOR dptext ON COLUMN parted_pub.region IS 'ALLOW';
GRANT SELECT ON parted, parted_pub, parted_sec TO regress_masked;
SET ROLE regress_masked;
SELECT memo FROM parted_pub;
SELECT memo FROM parted_sec;
\echo :LAST_ERROR_SQLSTATE
SELECT memo FROM parted;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- Text inside other types: composites, ranges, bytea, tsvector.
CREATE TYPE addr AS (street text, town text);
CREATE TYPE textrange AS RANGE (subtype = text);
CREATE TABLE inside (id int PRIMARY KEY, home addr, names_r textrange, raw bytea, words tsvector, span tstzrange, n int CHECK (n < 1000));
INSERT INTO inside VALUES (1, ROW('12 Wobblestone Lane', 'Grimsby'), textrange('Quince', 'Quincez'),
  convert_to('Quincewhistle', 'UTF8'), to_tsvector('simple', 'Quincewhistle'), tstzrange('2026-01-01', '2026-01-02'), 1);
CREATE INDEX inside_words ON inside USING gin (words);
ANALYZE inside;
GRANT SELECT, INSERT, UPDATE ON inside TO regress_masked;
SELECT column_name, type FROM dptext.unlabelled_text_columns WHERE table_name = 'inside' ORDER BY 1;
SET ROLE regress_masked;
SELECT id, span, n FROM inside;
SELECT (home).street FROM inside;
\echo :LAST_ERROR_SQLSTATE
SELECT names_r FROM inside;
\echo :LAST_ERROR_SQLSTATE
SELECT convert_from(raw, 'UTF8') FROM inside;
\echo :LAST_ERROR_SQLSTATE
SELECT words FROM inside;
\echo :LAST_ERROR_SQLSTATE
-- Their statistics and indexes are hidden too.
SELECT count(*) AS stats_rows FROM pg_stats WHERE tablename = 'inside' AND attname IN ('home', 'raw', 'words');
SELECT count(*) AS stats_rows_other FROM pg_stats WHERE tablename = 'inside' AND attname IN ('id', 'n');
SELECT count(*) AS hidden_index FROM pg_class WHERE relname = 'inside_words';
-- Writes are refused: a failing row's detail, a conflict or an index
-- order would show what reads are refused.
UPDATE inside SET n = 5000 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO inside (id) VALUES (1) ON CONFLICT DO NOTHING;
\echo :LAST_ERROR_SQLSTATE
-- And no dptext setting changes cluster-wide from here.
ALTER SYSTEM SET dptext.deny_unlabelled_text = off;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP TABLE inside, parted;
DROP TYPE addr, textrange;
RESET dptext.deny_unlabelled_text;
DROP TABLE child_notes, parent_notes;
DROP VIEW visit_comments;
DROP TABLE visits;
DROP DOMAIN short_text;
DROP ROLE regress_masked;
