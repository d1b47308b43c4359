-- Scale-out on Citus (scripts/citus.sh): a coordinator and two workers,
-- every node with the same dptext key. Sanitized texts are keyed by a key
-- made per cluster, so this file prints only facts about them: where they
-- were computed, and whether they equal what one node computes under the
-- same key for the same rows (the coordinator's own local table).
\set ON_ERROR_STOP 0
SET client_min_messages = warning;

-- Plans are read as text: does the distributed plan have `tasks` tasks
-- on the workers, and does the query sent to them call `fn`?
CREATE FUNCTION plan_facts(q text, fn text, OUT tasks int, OUT pushed_down boolean)
LANGUAGE plpgsql AS $$
DECLARE
    line text;
BEGIN
    pushed_down := false;
    FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
        IF line ~ 'Task Count: ' THEN
            tasks := substring(line from 'Task Count: ([0-9]+)')::int;
        END IF;
        IF line ~ '^\s*Query: ' AND position(fn || '(' in line) > 0 THEN
            pushed_down := true;
        END IF;
    END LOOP;
END $$;

CREATE TABLE dist (id int PRIMARY KEY, note text, ward text);
-- Labelled before it is distributed: Citus copies the label to every shard.
SECURITY LABEL FOR dptext ON COLUMN dist.note IS 'MASKED WITH santext(eps => 3)';
SELECT create_distributed_table('dist', 'id');
INSERT INTO dist
SELECT g,
       (ARRAY['Maria Lopez was seen at Springfield General on 3/14 for chest pain.',
              'Call John Smith at 555-201-9934 about the MRI on 02-Feb-2021.',
              'Pt Ybarra, 67 yo, discharged home with his daughter Ana.',
              'Follow-up with Dr. Okafor in two weeks; no fever, eating well.'])[1 + g % 4]
           || ' Visit ' || g || '.',
       'ward ' || (g % 3)
  FROM generate_series(1, 40) g;
-- One node's view of the same rows: a local table on the coordinator.
CREATE TABLE solo AS SELECT * FROM dist;

-- 1. The functions run on the workers, shard by shard ...
SELECT * FROM plan_facts('SELECT santext(note, 3) FROM dist', 'santext');
SELECT * FROM plan_facts('SELECT deidentify(note) FROM dist', 'deidentify');
SELECT * FROM plan_facts('SELECT ndd_distort(note) FROM dist', 'ndd_distort');
-- ... and, under the key, return what one node returns for the same rows.
SELECT count(*) AS rows, count(*) FILTER (WHERE d.s IS DISTINCT FROM l.s) AS differ,
       count(*) FILTER (WHERE d.s = d.note) AS unchanged
  FROM (SELECT id, note, santext(note, 3) s FROM dist) d
  JOIN (SELECT id, santext(note, 3) s FROM solo) l USING (id);
SELECT count(*) AS rows, count(*) FILTER (WHERE d.s IS DISTINCT FROM l.s) AS differ,
       count(*) FILTER (WHERE d.s <> d.note) AS changed
  FROM (SELECT id, note, deidentify(note) s FROM dist) d
  JOIN (SELECT id, deidentify(note) s FROM solo) l USING (id);
SELECT count(*) AS rows, count(*) FILTER (WHERE d.s IS DISTINCT FROM l.s) AS differ
  FROM (SELECT id, ndd_distort(note) s FROM dist WHERE id <= 8) d
  JOIN (SELECT id, ndd_distort(note) s FROM solo WHERE id <= 8) l USING (id);

-- 2. Labels set on the coordinator are what the workers hold.
SECURITY LABEL FOR dptext ON COLUMN dist.ward IS 'MASKED WITH deidentify(strategy => typed_placeholder)';
SELECT nodeport - (SELECT min(nodeport) FROM pg_dist_node) AS worker, result
  FROM run_command_on_workers($$SELECT string_agg(label, ' | ' ORDER BY objsubid)
                                  FROM pg_seclabel WHERE objoid = 'public.dist'::regclass$$)
  JOIN pg_dist_node USING (nodeport) ORDER BY 1;
SECURITY LABEL FOR dptext ON COLUMN dist.ward IS NULL;

-- 3. A sanitized copy of a distributed table is a distributed table,
-- co-located with its source, filled on the workers.
SELECT dptext.create_sanitized_view('dist', 'dist_safe');
SELECT logicalrelid::text, partmethod,
       colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'dist'::regclass) AS colocated
  FROM pg_dist_partition WHERE logicalrelid = 'dist_safe'::regclass;
SELECT count(*) AS rows, count(*) FILTER (WHERE s.note IS DISTINCT FROM santext(l.note, 3)) AS differ,
       count(*) FILTER (WHERE s.ward IS DISTINCT FROM l.ward) AS ward_changed
  FROM dist_safe s JOIN solo l USING (id);
SELECT source_table, column_name, event, materialized, randomness, mechanism FROM dptext.provenance ORDER BY id;
SELECT source_table, column_name, guarantee, releases, eps_total FROM dptext.budget;
-- A refresh fills it again on the workers; under the same key it is the
-- same release, so the budget does not grow.
UPDATE dist SET note = note || ' Seen again.' WHERE id = 1;
SELECT dptext.refresh_sanitized_table('dist_safe') AS rows;
SELECT note = santext((SELECT note FROM dist WHERE id = 1), 3) AS refreshed FROM dist_safe WHERE id = 1;
SELECT event, count(*) FROM dptext.provenance GROUP BY event ORDER BY event;
SELECT releases, eps_total FROM dptext.budget;
SELECT dptext.refresh_sanitized_table('solo');
UPDATE dist SET note = (SELECT note FROM solo WHERE id = 1) WHERE id = 1;

-- 4. Masking at the source, on the coordinator: a masked role's queries
-- on a distributed table are masked on every shard.
CREATE ROLE citus_masked LOGIN;
-- A second distributed table, labelled after it was distributed: Citus
-- labels the workers' copies of the table, not its shards, which take
-- their table's rules.
CREATE TABLE dist_late (id int PRIMARY KEY, note text);
SELECT create_distributed_table('dist_late', 'id', colocate_with => 'dist');
INSERT INTO dist_late SELECT id, note FROM solo;
SECURITY LABEL FOR dptext ON COLUMN dist_late.note IS 'MASKED WITH santext(eps => 3)';
-- One node's masked reads: a labelled local table.
CREATE TABLE one_node AS SELECT * FROM solo;
SECURITY LABEL FOR dptext ON COLUMN one_node.note IS 'MASKED WITH santext(eps => 3)';
-- A rule GROUPED BY another column of the row (the date shift per
-- patient): the group travels with the row to the shard that reads it.
CREATE TABLE dist_visits (id int PRIMARY KEY, patient_id int, note text);
SELECT create_distributed_table('dist_visits', 'id', colocate_with => 'dist');
INSERT INTO dist_visits
  SELECT g, g % 5, 'Seen on 03/14/2023, follow-up on 04/02/2023.' FROM generate_series(1, 40) g;
SECURITY LABEL FOR dptext ON COLUMN dist_visits.note IS 'MASKED WITH deidentify(operators => ''DATE:shift'') GROUPED BY patient_id';
CREATE TABLE one_visits AS SELECT * FROM dist_visits;
SECURITY LABEL FOR dptext ON COLUMN one_visits.note IS 'MASKED WITH deidentify(operators => ''DATE:shift'') GROUPED BY patient_id';
-- A table distributed by a labelled column: which shard holds a row is a
-- function of its raw value (its hash).
CREATE TABLE dist_by_name (id int, name text);
SECURITY LABEL FOR dptext ON COLUMN dist_by_name.name IS 'MASKED WITH deidentify(whole => true)';
SELECT create_distributed_table('dist_by_name', 'name');
INSERT INTO dist_by_name SELECT g, 'Name ' || g FROM generate_series(1, 40) g;
GRANT SELECT ON dist, dist_late, solo, one_node, dist_visits, one_visits, dist_by_name TO citus_masked;
GRANT CREATE ON SCHEMA public TO citus_masked;
SECURITY LABEL FOR dptext ON ROLE citus_masked IS 'MASKED';
-- The role's label reached every worker.
SELECT nodeport - (SELECT min(nodeport) FROM pg_dist_node) AS worker, result
  FROM run_command_on_workers($$SELECT label FROM pg_shseclabel WHERE provider = 'dptext'
                                  AND objoid = 'citus_masked'::regrole$$)
  JOIN pg_dist_node USING (nodeport) ORDER BY 1;
CREATE TABLE expected AS SELECT id, santext(note, 3) AS note FROM solo;
GRANT SELECT ON expected TO citus_masked;
SET ROLE citus_masked;
SELECT (dptext.session_masking() ->> 'masked')::boolean AS masked;
-- a router plan (one shard) and a multi-shard plan
SELECT tasks FROM plan_facts('SELECT note FROM dist WHERE id = 3', 'dptext.mask');
SELECT d.note = e.note AS router_masked FROM dist d JOIN expected e USING (id) WHERE id = 3;
SELECT tasks, pushed_down FROM plan_facts('SELECT id, note FROM dist', 'dptext.mask');
SELECT count(*) AS rows, count(*) FILTER (WHERE d.note IS DISTINCT FROM e.note) AS differ
  FROM dist d JOIN expected e USING (id);
SELECT count(*) AS rows, count(*) FILTER (WHERE d.note IS DISTINCT FROM e.note) AS differ
  FROM dist_late d JOIN expected e USING (id);
-- what one node gives the same role for the same rows
SELECT count(*) AS rows, count(*) FILTER (WHERE d.note IS DISTINCT FROM o.note) AS differ
  FROM dist d JOIN one_node o USING (id);
-- GROUPED BY: one shift per patient (5 patients, one text), on every
-- shard as on one node
SELECT count(*) AS rows, count(*) FILTER (WHERE d.note IS DISTINCT FROM o.note) AS differ,
       count(DISTINCT d.note) AS distinct_notes
  FROM dist_visits d JOIN one_visits o USING (id);
SELECT max(n) AS shifts_per_patient
  FROM (SELECT patient_id, count(DISTINCT note) AS n FROM dist_visits GROUP BY patient_id) x;
-- filters, aggregates and joins compute on masked values only
-- (10 raw notes start so; how many masked ones do depends on the key)
SELECT (SELECT count(*) FROM dist WHERE note LIKE 'Maria Lopez%')
     = (SELECT count(*) FROM expected WHERE note LIKE 'Maria Lopez%') AS filter_sees_masked;
SELECT count(*) AS joined_on_raw FROM dist d JOIN solo s ON s.note = d.note;
SELECT count(*) AS joined_on_masked FROM dist d JOIN expected e ON e.note = d.note;
SELECT md5(string_agg(note, '|' ORDER BY id)) AS agg FROM dist WHERE id <= 5
EXCEPT SELECT md5(string_agg(note, '|' ORDER BY id)) FROM expected WHERE id <= 5;
-- plans Citus splits (a CTE with LIMIT, a subquery pulled to the coordinator)
WITH first AS (SELECT id, note FROM dist ORDER BY id LIMIT 3)
SELECT count(*) FILTER (WHERE f.note = e.note) AS masked FROM first f JOIN expected e USING (id);
SELECT count(*) FILTER (WHERE d.note = e.note) AS masked
  FROM dist d JOIN (SELECT id FROM dist ORDER BY id LIMIT 2) s USING (id) JOIN expected e USING (id);
-- each shard read on its worker, as the masked role, is masked there
SELECT count(*) > 10 AS shards_with_rows, count(*) FILTER (WHERE r.result IS DISTINCT FROM e.h) AS differ
  FROM run_command_on_shards('dist', $$SELECT md5(string_agg(note, '|' ORDER BY id)) FROM %s$$) r
  JOIN (SELECT get_shard_id_for_distribution_column('dist', id) AS shardid,
               md5(string_agg(note, '|' ORDER BY id)) AS h
          FROM expected GROUP BY 1) e USING (shardid);
SELECT count(*) > 10 AS shards_with_rows, count(*) FILTER (WHERE r.result IS DISTINCT FROM e.h) AS differ
  FROM run_command_on_shards('dist_late', $$SELECT md5(string_agg(note, '|' ORDER BY id)) FROM %s$$) r
  JOIN (SELECT get_shard_id_for_distribution_column('dist_late', id) AS shardid,
               md5(string_agg(note, '|' ORDER BY id)) AS h
          FROM expected GROUP BY 1) e USING (shardid);
-- the rule function cannot be called as an oracle, on any node
SELECT dptext.mask('Maria Lopez was seen', 'santext', '{"embedding":"glove","eps":3.0}') FROM dist WHERE id = 1;
SELECT dptext.mask(ward, 'santext', '{"embedding":"glove","eps":3.0}') FROM dist WHERE id = 1;
SELECT dptext.mask(note, 'santext', '{"embedding":"glove","eps":0.1}') FROM dist WHERE id = 1;
-- nor over a result of the session's own making: the call is dropped there
-- (Citus repeats the coordinator's calls over its intermediate results,
-- which were masked where they were read), so it gives back its input
BEGIN;
SELECT create_intermediate_result('guess', $$SELECT 'Maria Lopez was seen'::text AS note$$) AS rows;
SELECT dptext.mask(note, 'santext', '{"embedding":"glove","eps":3.0}') AS given_back
  FROM read_intermediate_result('guess', 'binary') AS r(note text);
COMMIT;
-- nor by naming a table of its own like a shard: a table the masked role
-- created and filled is not a shard (another owner), so it is served as
-- written, not through the distributed table's rule
SELECT format('CREATE TABLE public.spoof_%s AS SELECT 1 AS id, %L::text AS note', shardid,
              'Maria Lopez was seen at Springfield General on 3/14 for chest pain.')
  FROM pg_dist_shard WHERE logicalrelid = 'dist'::regclass ORDER BY shardid LIMIT 1 \gexec
SELECT format('SELECT note = %L AS served_as_written FROM public.spoof_%s',
              'Maria Lopez was seen at Springfield General on 3/14 for chest pain.', shardid)
  FROM pg_dist_shard WHERE logicalrelid = 'dist'::regclass ORDER BY shardid LIMIT 1 \gexec
-- writes to the labelled table are refused
UPDATE dist SET note = 'x' WHERE id = 1;
-- a table distributed by a labelled column is refused, through the table
-- and on every shard: tableoid, or a read of one shard, would say which
-- shard each raw value hashed to
SELECT id, tableoid::regclass FROM dist_by_name ORDER BY id LIMIT 3;
SELECT count(*) FROM dist_by_name;
SELECT count(*) AS shards, count(*) FILTER (WHERE NOT success) AS refused
  FROM run_command_on_shards('dist_by_name', $$SELECT count(*) FROM %s$$);
RESET ROLE;

-- 5. Failing closed: a worker that does not know the role as masked (its
-- label removed there alone, propagation off) refuses the coordinator's
-- masked queries instead of returning raw values.
SELECT success FROM master_run_on_worker(ARRAY['127.0.0.1'],
    ARRAY[(SELECT min(nodeport) FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0)],
    ARRAY[$cmd$DO $d$ BEGIN SET LOCAL citus.enable_ddl_propagation = off;
          SECURITY LABEL FOR dptext ON ROLE citus_masked IS NULL; END $d$ $cmd$], false);
SET ROLE citus_masked;
SELECT count(*) AS notes FROM dist WHERE note IS NOT NULL;
SELECT count(*) AS rows FROM dist;
RESET ROLE;
SELECT success FROM master_run_on_worker(ARRAY['127.0.0.1'],
    ARRAY[(SELECT min(nodeport) FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0)],
    ARRAY[$cmd$DO $d$ BEGIN SET LOCAL citus.enable_ddl_propagation = off;
          SECURITY LABEL FOR dptext ON ROLE citus_masked IS 'MASKED'; END $d$ $cmd$], false);
SET ROLE citus_masked;
SELECT count(*) AS notes FROM dist WHERE note IS NOT NULL;
RESET ROLE;
