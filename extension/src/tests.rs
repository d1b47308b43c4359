//! `#[pg_test]`s: every SQL function, its NULL behaviour and error paths.
//! SQLSTATEs are checked by the SQL regression files under `tests/sql`.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::test_support::failure_of;

    fn one(sql: &str) -> Option<String> {
        Spi::get_one::<String>(sql).expect("query runs")
    }

    /// The message of the ERROR that running `sql` raises, if any.
    fn error_of(sql: &str) -> Option<String> {
        PgTryBuilder::new(|| {
            Spi::run(sql).ok();
            None
        })
        .catch_others(|e| match e {
            pg_sys::panic::CaughtError::PostgresError(r)
            | pg_sys::panic::CaughtError::ErrorReport(r) => Some(r.message().to_string()),
            _ => None,
        })
        .execute()
    }

    fn words(s: &str) -> usize {
        dptext_core::text::Segmented::new(s).len()
    }

    const NOTE: &str = "The patient was admitted with chest pain and a mild fever.";

    #[pg_test]
    fn santext_replaces_words_and_keeps_layout() {
        Spi::run("SET dptext.seed = 42").unwrap();
        let out = one(&format!("SELECT santext('{NOTE}', 3.0)")).unwrap();
        assert_ne!(out, NOTE);
        assert_eq!(words(&out), words(NOTE));
        assert!(out.ends_with('.'));
        assert!(out.chars().next().is_some_and(char::is_uppercase), "{out}");
        // The matrix is memory-mapped, shared by every backend.
        let mapped = one("SELECT dptext_info()->'loaded_vocabularies'->0->>'mapped'");
        assert_eq!(mapped.as_deref(), Some("true"));
    }

    #[pg_test]
    fn seeded_mode_is_deterministic_and_seed_bound() {
        Spi::run("SET dptext.seed = 7").unwrap();
        let a = one(&format!("SELECT santext('{NOTE}', 2.0)"));
        let b = one(&format!("SELECT santext('{NOTE}', 2.0)"));
        assert_eq!(a, b);
        Spi::run("SET dptext.seed = 8").unwrap();
        assert_ne!(a, one(&format!("SELECT santext('{NOTE}', 2.0)")));
    }

    #[pg_test]
    fn os_mode_differs_between_calls() {
        Spi::run("RESET dptext.seed").unwrap();
        let a = one(&format!("SELECT santext('{NOTE}', 1.0)"));
        let b = one(&format!("SELECT santext('{NOTE}', 1.0)"));
        assert_ne!(a, b);
    }

    #[pg_test]
    fn strict_functions_return_null_for_null() {
        for sql in [
            "SELECT santext(NULL, 3.0)",
            "SELECT santext('x', NULL)",
            "SELECT santext_plus(NULL, 3.0)",
            "SELECT sanitize(NULL, 'santext', '{\"eps\": 1}')::text",
            "SELECT custext(NULL, 1.0)",
            "SELECT custext('x', NULL)",
            "SELECT sanitize('x', NULL, '{\"eps\": 1}')::text",
        ] {
            assert_eq!(one(sql), None, "{sql}");
        }
    }

    #[pg_test]
    fn santext_plus_with_p_zero_keeps_common_words() {
        Spi::run("SET dptext.seed = 1").unwrap();
        // Every word here is among the most frequent 10%: non-sensitive, and
        // with p = 0 never re-drawn.
        let t = "The man said that it was in the city.";
        assert_eq!(
            one(&format!("SELECT santext_plus('{t}', 3.0, p => 0.0)")).unwrap(),
            t
        );
        // A rare word is always re-drawn.
        let out = one("SELECT santext_plus('the zygomatic fracture', 3.0, p => 0.0)").unwrap();
        assert!(
            out.starts_with("the ") && out != "the zygomatic fracture",
            "{out}"
        );
    }

    #[pg_test]
    fn sanitize_returns_text_and_cost() {
        Spi::run("SET dptext.seed = 3").unwrap();
        let j = Spi::get_one::<pgrx::JsonB>(&format!(
            "SELECT sanitize('{NOTE}', 'santext_plus', '{{\"eps\": 3, \"p\": 0.5}}')"
        ))
        .unwrap()
        .unwrap()
        .0;
        assert!(j["text"].is_string());
        assert_eq!(j["cost"]["mechanism"], "santext_plus");
        assert_eq!(j["cost"]["guarantee"]["kind"], "umldp");
        assert!((j["cost"]["guarantee"]["eps0"].as_f64().unwrap() - 2f64.ln()).abs() < 1e-12);
        assert_eq!(j["cost"]["tokens"], words(NOTE));
        let s = Spi::get_one::<pgrx::JsonB>(&format!(
            "SELECT sanitize('{NOTE}', 'santext', '{{\"eps\": 3}}')"
        ))
        .unwrap()
        .unwrap()
        .0;
        assert_eq!(s["cost"]["guarantee"]["kind"], "metric_ldp");
        assert!(s["cost"]["worst_case_eps"].as_f64().unwrap() > 0.0);
    }

    #[pg_test]
    fn wordpiece_embedding_works() {
        Spi::run("SET dptext.seed = 5").unwrap();
        let out = one("SELECT santext('unbelievable results', 1000.0, embedding => 'wordpiece')")
            .unwrap();
        // At a very large eps every piece maps to itself.
        assert_eq!(out, "unbelievable results");
    }

    #[pg_test]
    fn odd_inputs_are_fine() {
        Spi::run("SET dptext.seed = 2").unwrap();
        assert_eq!(one("SELECT santext('', 3.0)").unwrap(), "");
        assert_eq!(one("SELECT santext(' ?!... ', 3.0)").unwrap(), " ?!... ");
        let emoji = one("SELECT santext('🙂🙂 fever 🙂', 3.0)").unwrap();
        assert!(emoji.starts_with("🙂🙂 ") && emoji.ends_with(" 🙂"));
        let cyr = one("SELECT santext('Пациент жалуется на боль', 3.0)").unwrap();
        assert_eq!(words(&cyr), 4);
        let big = one("SELECT length(santext(repeat('🙂, ', 2500000), 3.0))::text").unwrap();
        assert_eq!(big, "7500000");
    }

    #[pg_test]
    fn keyed_mode_is_stable_and_the_key_is_never_shown() {
        Spi::run("SET dptext.key = 'correct horse battery staple'").unwrap();
        let a = one(&format!("SELECT santext('{NOTE}', 2.0)"));
        assert_eq!(a, one(&format!("SELECT santext('{NOTE}', 2.0)")));
        assert_eq!(one("SHOW dptext.key").unwrap(), "********");
        assert_eq!(
            one("SELECT current_setting('dptext.key')").unwrap(),
            "********"
        );
        let settings = one("SELECT coalesce(string_agg(setting, ','), '') FROM pg_settings WHERE name = 'dptext.key'").unwrap();
        assert!(!settings.contains("horse"), "{settings}");
        let info = one("SELECT dptext_info()::text").unwrap();
        assert!(
            info.contains("\"keyed\"") && !info.contains("horse"),
            "{info}"
        );
        Spi::run("SET dptext.seed = 7").unwrap();
        // The key wins over the seed.
        assert_eq!(a, one(&format!("SELECT santext('{NOTE}', 2.0)")));
    }

    #[pg_test]
    fn key_file_gives_the_same_outputs_as_the_key() {
        use std::os::unix::fs::PermissionsExt;
        let key = "a key kept in a file, not in SQL";
        let path = std::env::temp_dir().join(format!("dptext-pgtest-key-{}", std::process::id()));
        std::fs::write(&path, format!("{key}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        Spi::run(&format!("SET dptext.key_file = '{}'", path.display())).unwrap();
        let from_file = one(&format!("SELECT santext('{NOTE}', 2.0)"));
        assert_eq!(from_file, one(&format!("SELECT santext('{NOTE}', 2.0)")));
        Spi::run(&format!("SET dptext.key = '{key}'")).unwrap();
        assert_eq!(from_file, one(&format!("SELECT santext('{NOTE}', 2.0)")));
        Spi::run("RESET dptext.key").unwrap();
        std::fs::remove_file(&path).unwrap();
    }

    #[pg_test(
        error = "invalid value for parameter \"key\": must be at least 16 bytes (got 5); use a random key, e.g. `openssl rand -hex 32`"
    )]
    fn short_keys_are_refused() {
        Spi::run("SET dptext.key = 'short'").unwrap();
        Spi::run("SELECT santext('x', 1)").unwrap();
    }

    #[pg_test]
    fn readable_key_files_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("dptext-pgtest-open-{}", std::process::id()));
        std::fs::write(&path, "0123456789abcdef0123").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        Spi::run(&format!("SET dptext.key_file = '{}'", path.display())).unwrap();
        let caught = error_of("SELECT santext('x', 1)");
        std::fs::remove_file(&path).unwrap();
        let msg = caught.expect("a world-readable key file is an error");
        assert!(msg.contains("chmod 600"), "{msg}");
    }

    #[pg_test]
    fn custext_draws_from_output_sets_and_keeps_stopwords() {
        // A small vocabulary keeps the mapping build fast in a debug build.
        Spi::run("SET dptext.glove_words = 3000").unwrap();
        Spi::run("SET dptext.custext_build = on").unwrap();
        Spi::run("SET dptext.seed = 4").unwrap();
        let t = "The doctor saw the patient and the doctor left.";
        let out = one(&format!("SELECT custext('{t}', 1.0)")).unwrap();
        assert_eq!(words(&out), words(t));
        let w: Vec<&str> = out
            .split(|c: char| !c.is_alphanumeric())
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(
            (w[0], w[3], w[6]),
            ("The", "the", "the"),
            "stopwords kept: {out}"
        );
        assert_eq!(
            w[1].to_lowercase(),
            w[7],
            "record level: both 'doctor's map alike: {out}"
        );
        assert_eq!(out, one(&format!("SELECT custext('{t}', 1.0)")).unwrap());
        let j = Spi::get_one::<pgrx::JsonB>(&format!(
            "SELECT sanitize('{t}', 'custext', '{{\"eps\": 2, \"k\": 10, \"mapping\": \"conservative\", \"level\": \"token\"}}')"
        ))
        .unwrap()
        .unwrap()
        .0;
        assert_eq!(j["cost"]["guarantee"]["kind"], "dp");
        assert_eq!(j["cost"]["output_set_size"], 10);
        Spi::run("RESET dptext.seed").unwrap();
        // Dataset level without a key or seed is refused.
        let caught = error_of("SELECT custext('fever', 1, level => 'dataset')");
        assert!(caught.is_some_and(|m| m.contains("needs a secret key")));
    }

    #[pg_test]
    fn detect_pii_finds_typed_spans_with_character_positions() {
        let t = "Zoë Müller called (555) 123-4567 on July 19, 2022 from St. Mary's Hospital; mail zoe.muller@example.org";
        let q = t.replace('\'', "''");
        let rows = Spi::connect(|c| {
            c.select(
                &format!("SELECT start_pos, end_pos, label, value, score, substr('{q}', start_pos, end_pos - start_pos) = value FROM detect_pii('{q}')"),
                None,
                &[],
            )
            .unwrap()
            .map(|r| {
                (
                    r.get::<String>(3).unwrap().unwrap(),
                    r.get::<String>(4).unwrap().unwrap(),
                    r.get::<f64>(5).unwrap().unwrap(),
                    r.get::<bool>(6).unwrap().unwrap(),
                )
            })
            .collect::<Vec<_>>()
        });
        for (label, value, score, substr_ok) in &rows {
            assert!(
                *substr_ok,
                "{label} {value}: substr does not give the value"
            );
            assert!((0.0..=1.0).contains(score));
        }
        let has = |l: &str, v: &str| rows.iter().any(|r| r.0 == l && r.1 == v);
        assert!(has("CONTACT", "(555) 123-4567"), "{rows:?}");
        assert!(has("DATE", "July 19, 2022"), "{rows:?}");
        assert!(has("ORGANIZATION", "St. Mary's Hospital"), "{rows:?}");
        assert!(has("CONTACT", "zoe.muller@example.org"), "{rows:?}");
        assert!(
            rows.iter()
                .any(|r| r.0 == "PERSON" && r.1.contains("Müller")),
            "{rows:?}"
        );
        let none = Spi::get_one::<i64>("SELECT count(*) FROM detect_pii(NULL)").unwrap();
        assert_eq!(none, Some(0));
        let empty = Spi::get_one::<i64>("SELECT count(*) FROM detect_pii('')").unwrap();
        assert_eq!(empty, Some(0));
    }

    #[pg_test(
        error = "asset \"onnxruntime\" is missing at /nonexistent/onnxruntime/libonnxruntime.so.1.31.1: run `dptext assets fetch` (or set DPTEXT_ASSETS / dptext.assets_dir)"
    )]
    fn detect_pii_without_assets_names_the_fetch_command() {
        Spi::run("SET dptext.assets_dir = '/nonexistent'").unwrap();
        Spi::run("SELECT * FROM detect_pii('x')").unwrap();
    }

    #[pg_test]
    fn custext_missing_mapping_names_the_setting_when_building_is_off() {
        Spi::run("SET dptext.glove_words = 2500").unwrap();
        let caught = PgTryBuilder::new(|| {
            Spi::run("SELECT custext('fever', 1, k => 7)").ok();
            None
        })
        .catch_others(|e| match e {
            pg_sys::panic::CaughtError::PostgresError(r)
            | pg_sys::panic::CaughtError::ErrorReport(r) => Some((
                r.sql_error_code(),
                r.message().to_string(),
                r.hint().map(str::to_string),
            )),
            _ => None,
        })
        .execute();
        let (code, msg, hint) = caught.expect("an uncached mapping is an error");
        assert_eq!(code, PgSqlErrorCode::ERRCODE_UNDEFINED_FILE, "{msg}");
        assert!(
            msg.starts_with("custext mapping for k = 7, mapping balanced"),
            "{msg}"
        );
        // One fix, in SQL's terms.
        let hint = hint.unwrap_or_default();
        assert!(hint.contains("dptext.custext_build"), "{hint}");
        assert!(!hint.contains("custext-map"), "{hint}");
    }

    #[pg_test]
    fn deidentify_replaces_detected_spans_and_states_its_epsilon() {
        let t = "Call Kathryn Herrera at (555) 123-4567 about MRN-580486.";
        Spi::run("SET dptext.seed = 9").unwrap();
        let out = one(&format!("SELECT deidentify('{t}')")).unwrap();
        for v in ["Kathryn", "Herrera", "123-4567", "580486"] {
            assert!(!out.contains(v), "{v} survived: {out}");
        }
        assert!(out.starts_with("Call ") && out.contains(" at "), "{out}");
        let typed = one(&format!("SELECT deidentify('{t}', 'typed_placeholder')")).unwrap();
        assert!(
            typed.contains("<PERSON>") && typed.contains("<CONTACT>") && typed.contains("<ID>"),
            "{typed}"
        );
        let j = Spi::get_one::<pgrx::JsonB>(&format!(
            "SELECT sanitize('{t}', 'deidentify', '{{\"strategy\": \"redact\", \"p\": 0.5}}')"
        ))
        .unwrap()
        .unwrap()
        .0;
        assert_eq!(j["cost"]["guarantee"]["kind"], "replacement");
        // Redaction has a single surrogate (pi = 1): eps = ln(1 / p).
        let eps = j["cost"]["guarantee"]["eps"].as_f64().unwrap();
        assert!((eps - 2f64.ln()).abs() < 1e-9, "{eps}");
        assert_eq!(one("SELECT deidentify(NULL)"), None);
        let c = Spi::get_one::<pgrx::JsonB>(&format!(
            "SELECT sanitize('{t}', 'deidentify', '{{\"consistent\": true}}')"
        ))
        .unwrap()
        .unwrap()
        .0;
        assert_eq!(c["cost"]["guarantee"]["kind"], "none");
    }

    #[pg_test(
        error = "invalid value for parameter \"strategy\": \"mask\" is not one of 'redact', 'typed_placeholder', 'named_placeholder', 'word_by_word', 'full_entity'"
    )]
    fn deidentify_strategy_is_validated() {
        Spi::run("SELECT deidentify('x', 'mask')").unwrap();
    }

    #[pg_test]
    fn recognizers_allow_list_and_threshold_change_detection() {
        let t = "Badge B-12345 seen at Zyx by Ybarra.";
        let labels = |sql_label: &str| -> String {
            one(&format!(
                "SELECT coalesce(string_agg(value, '|' ORDER BY start_pos), '') FROM detect_pii('{t}') WHERE label = '{sql_label}'"
            ))
            .unwrap_or_default()
        };
        assert!(!labels("ORGANIZATION").contains("Zyx"));
        Spi::run("INSERT INTO dptext.recognizers (name, label, words) VALUES ('ours', 'ORGANIZATION', '{Zyx}')").unwrap();
        Spi::run("INSERT INTO dptext.recognizers (name, label, pattern, context, score) VALUES ('badge', 'ID', '\\bB-[0-9]{5}\\b', '{badge}', 0.5)").unwrap();
        assert_eq!(labels("ORGANIZATION"), "Zyx");
        assert!(labels("ID").contains("B-12345"), "{}", labels("ID"));
        let person = labels("PERSON");
        assert!(person.contains("Ybarra"), "{person}");
        Spi::run("INSERT INTO dptext.allow_list VALUES ('ybarra')").unwrap();
        assert!(!labels("PERSON").contains("Ybarra"));
        // deidentify sees the same recognizers.
        let out = one(&format!("SELECT deidentify('{t}', 'typed_placeholder')")).unwrap();
        assert!(
            out.contains("at <ORGANIZATION>") && out.contains("by Ybarra"),
            "{out}"
        );
        // A threshold above every score leaves nothing.
        Spi::run("SET dptext.detect_threshold = 1").unwrap();
        assert_eq!(
            one(&format!("SELECT count(*)::text FROM detect_pii('{t}')")).unwrap(),
            "0"
        );
        Spi::run("RESET dptext.detect_threshold").unwrap();
        Spi::run("DELETE FROM dptext.recognizers; DELETE FROM dptext.allow_list").unwrap();
        assert!(!labels("ORGANIZATION").contains("Zyx"));
    }

    #[pg_test(
        error = "invalid value for parameter \"recognizers\": recognizer \"bad\": unknown label \"NAME\"; the labels are PERSON, LOCATION, ORGANIZATION, DATE, AGE, CONTACT, ID"
    )]
    fn a_recognizer_that_does_not_compile_is_refused_when_written() {
        Spi::run(
            "INSERT INTO dptext.recognizers (name, label, words) VALUES ('bad', 'NAME', '{x}')",
        )
        .unwrap();
    }

    #[pg_test]
    fn deidentify_operators_whole_values_and_shift_from_sql_and_rules() {
        Spi::run("SET dptext.seed = 4").unwrap();
        let t = "Seen 03/14/2019 and 03/20/2019 by Dr. Ybarra, MRN: 8249813.";
        let out = one(&format!(
            "SELECT deidentify('{t}', operators => 'DATE:shift,ID:redact,PERSON:typed_placeholder', shift_days => 30)"
        ))
        .unwrap();
        assert!(
            out.contains("Dr. <PERSON>") && out.contains("MRN: [REDACTED]"),
            "{out}"
        );
        assert!(!out.contains("03/14/2019"), "{out}");
        // The same through sanitize, with the cost per label.
        let j = Spi::get_one::<pgrx::JsonB>(&format!(
            "SELECT sanitize('{t}', 'deidentify', '{{\"operators\": {{\"DATE\": \"shift\"}}}}')"
        ))
        .unwrap()
        .unwrap()
        .0;
        assert_eq!(j["cost"]["guarantee"]["kind"], "none");
        let labels = j["cost"]["labels"].as_array().unwrap();
        assert!(
            labels
                .iter()
                .any(|l| l["label"] == "DATE" && l["operator"] == "shift"),
            "{j}"
        );
        assert!(
            labels
                .iter()
                .any(|l| l["label"] == "PERSON" && l["guarantee"]["kind"] == "replacement"),
            "{j}"
        );
        // A whole-value rule on a name column.
        let name =
            one("SELECT deidentify('zzq qxv', whole => true, strategy => 'typed_placeholder')")
                .unwrap();
        assert_eq!(name, "<PERSON>");
        let rule = one("SELECT dptext.parse_rule('MASKED WITH deidentify(operators => ''DATE:shift;ID:redact'', whole => false)')->>'label'").unwrap();
        assert!(
            rule.contains("operators => 'DATE:shift,ID:redact'"),
            "{rule}"
        );
    }

    #[pg_test(error = "invalid value for parameter \"p\": must be in [0, 1], got 1.5")]
    fn deidentify_p_is_validated() {
        Spi::run("SELECT deidentify('x', 'redact', 1.5)").unwrap();
    }

    #[pg_test(error = "invalid value for parameter \"k\": must be in [1, 2000], got 0")]
    fn custext_k_is_validated() {
        Spi::run("SELECT custext('x', 1, k => 0)").unwrap();
    }

    #[pg_test(
        error = "invalid value for parameter \"mapping\": \"greedy\" is not one of 'aggressive', 'balanced', 'conservative'"
    )]
    fn custext_mapping_is_validated() {
        Spi::run("SELECT custext('x', 1, mapping => 'greedy')").unwrap();
    }

    #[pg_test(error = "invalid value for parameter \"eps\": must be > 0, got 0")]
    fn eps_zero_is_rejected() {
        Spi::run("SELECT santext('x', 0.0)").unwrap();
    }

    #[pg_test(error = "invalid value for parameter \"eps\": must be > 0, got -1")]
    fn eps_negative_is_rejected() {
        Spi::run("SELECT santext('x', -1)").unwrap();
    }

    #[pg_test(error = "invalid value for parameter \"eps\": must be a number > 0, got NaN")]
    fn eps_nan_is_rejected() {
        Spi::run("SELECT santext('x', 'NaN'::float8)").unwrap();
    }

    #[pg_test(error = "invalid value for parameter \"eps\": must be finite")]
    fn eps_infinite_is_rejected() {
        Spi::run("SELECT santext_plus('x', 'Infinity'::float8)").unwrap();
    }

    #[pg_test(error = "invalid value for parameter \"p\": must be in [0, 1], got 1.5")]
    fn p_out_of_range_is_rejected() {
        Spi::run("SELECT santext_plus('x', 1, p => 1.5)").unwrap();
    }

    #[pg_test(error = "invalid value for parameter \"w\": must be in [0, 1], got -0.1")]
    fn w_out_of_range_is_rejected() {
        Spi::run("SELECT santext_plus('x', 1, w => -0.1)").unwrap();
    }

    #[pg_test(
        error = "invalid value for parameter \"embedding\": \"bert\" is not one of 'glove', 'wordpiece'"
    )]
    fn unknown_embedding_is_rejected() {
        Spi::run("SELECT santext('x', 1, embedding => 'bert')").unwrap();
    }

    #[pg_test(
        error = "unknown mechanism \"rot13\": expected one of santext, santext_plus, custext, deidentify, ndd"
    )]
    fn unknown_mechanism_is_rejected() {
        Spi::run("SELECT sanitize('x', 'rot13', '{\"eps\": 1}')").unwrap();
    }

    #[pg_test(
        error = "invalid value for parameter \"params\": unknown field `epsilon`, expected one of `eps`, `embedding`, `vocabulary`"
    )]
    fn unknown_parameter_is_rejected() {
        Spi::run("SELECT sanitize('x', 'santext', '{\"epsilon\": 1}')").unwrap();
    }

    #[pg_test(error = "input of 20 bytes exceeds the limit of 10 bytes")]
    fn oversized_input_is_rejected() {
        Spi::run("SET dptext.max_input_bytes = 10").unwrap();
        Spi::run("SELECT santext('twenty bytes of text', 1)").unwrap();
    }

    #[pg_test(
        error = "asset \"glove-6b-50d\" is missing at /nonexistent/glove-6b-50d/meta.json: run `dptext assets fetch` (or set DPTEXT_ASSETS / dptext.assets_dir)"
    )]
    fn missing_assets_name_the_fetch_command() {
        Spi::run("SET dptext.assets_dir = '/nonexistent'").unwrap();
        Spi::run("SELECT santext('x', 1)").unwrap();
    }

    fn count(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).expect("query runs").unwrap_or(-1)
    }

    fn records_with_rules() {
        Spi::run(
            "CREATE TABLE records (id int PRIMARY KEY, name varchar(40), note text, visits int);
             INSERT INTO records SELECT g, (ARRAY['Kathryn Herrera', 'John Smith', 'Maria Garcia'])[1 + g % 3],
                    'The patient was admitted with chest pain and a mild fever, visit ' || g || '.', g
               FROM generate_series(1, 50) g;
             SECURITY LABEL FOR dptext ON COLUMN records.note IS 'MASKED WITH santext(eps => 3)';
             SECURITY LABEL FOR dptext ON COLUMN records.name IS 'MASKED WITH deidentify(strategy => typed_placeholder)';",
        )
        .unwrap();
    }

    #[pg_test]
    fn labels_are_validated_when_set() {
        Spi::run("CREATE TABLE t (a text, b int, c char(5)); CREATE ROLE dptext_label_role")
            .unwrap();
        for (sql, want) in [
            ("SECURITY LABEL FOR dptext ON COLUMN t.a IS 'MASKED WITH santext(eps => 0)'", "must be > 0, got 0"),
            ("SECURITY LABEL FOR dptext ON COLUMN t.a IS 'MASKED WITH sandtext(eps => 3)'", "unknown mechanism \"sandtext\""),
            ("SECURITY LABEL FOR dptext ON COLUMN t.a IS 'MASKED WITH santext(eps => 3, p => 0.5)'", "unknown field `p`"),
            ("SECURITY LABEL FOR dptext ON COLUMN t.a IS 'HIDDEN'", "expected masked"),
            ("SECURITY LABEL FOR dptext ON COLUMN t.b IS 'MASKED WITH santext(eps => 3)'", "text, varchar and char columns"),
            ("SECURITY LABEL FOR dptext ON TABLE t IS 'MASKED WITH santext(eps => 3)'", "not the whole relation"),
            ("SECURITY LABEL FOR dptext ON SCHEMA public IS 'MASKED'", "columns and roles only"),
            ("SECURITY LABEL FOR dptext ON ROLE dptext_label_role IS 'MASKED WITH santext(eps => 3)'", "must be 'MASKED'"),
        ] {
            let err = error_of(sql).unwrap_or_else(|| panic!("accepted: {sql}"));
            assert!(err.contains(want), "{sql}: {err}");
        }
        assert_eq!(
            count("SELECT count(*) FROM pg_seclabel WHERE provider = 'dptext'"),
            0
        );
        for sql in [
            "SECURITY LABEL FOR dptext ON COLUMN t.a IS 'masked with CUSTEXT(eps => 1.5, k => 30, mapping => conservative)'",
            "SECURITY LABEL FOR dptext ON COLUMN t.c IS 'MASKED WITH deidentify'",
            "SECURITY LABEL FOR dptext ON ROLE dptext_label_role IS 'MASKED'",
        ] {
            Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
        assert_eq!(
            one(
                "SELECT mechanism || ' ' || params::text FROM dptext.rules WHERE column_name = 'a'"
            )
            .unwrap(),
            r#"custext {"k": 30, "eps": 1.5, "level": "record", "metric": "euclidean", "mapping": "conservative", "embedding": "glove", "keep_stopwords": true}"#
        );
        assert_eq!(
            one("SELECT string_agg(role_name, ',') FROM dptext.masked_roles").unwrap(),
            "dptext_label_role"
        );
        // Removing a label is always allowed.
        Spi::run("SECURITY LABEL FOR dptext ON COLUMN t.a IS NULL").unwrap();
        assert_eq!(count("SELECT count(*) FROM dptext.rules"), 1);
    }

    #[pg_test]
    fn dropping_labelled_objects_leaves_no_dangling_rule() {
        records_with_rules();
        Spi::run(
            "CREATE ROLE dptext_gone; SECURITY LABEL FOR dptext ON ROLE dptext_gone IS 'MASKED'",
        )
        .unwrap();
        assert_eq!(count("SELECT count(*) FROM dptext.rules"), 2);
        Spi::run("ALTER TABLE records DROP COLUMN name").unwrap();
        assert_eq!(count("SELECT count(*) FROM dptext.rules"), 1);
        assert_eq!(
            count("SELECT count(*) FROM pg_seclabel WHERE provider = 'dptext'"),
            1
        );
        Spi::run("DROP TABLE records").unwrap();
        assert_eq!(
            count("SELECT count(*) FROM pg_seclabel WHERE provider = 'dptext'"),
            0
        );
        Spi::run("DROP ROLE dptext_gone").unwrap();
        assert_eq!(count("SELECT count(*) FROM dptext.masked_roles"), 0);
    }

    #[pg_test]
    fn sanitized_view_applies_rules_and_records_provenance() {
        records_with_rules();
        Spi::run("SET dptext.key = 'a key for the sanitized view test'").unwrap();
        assert_eq!(
            one("SELECT dptext.create_sanitized_view('records', 'records_safe')::text").unwrap(),
            "records_safe"
        );
        assert_eq!(
            one("SELECT relkind::text FROM pg_class WHERE relname = 'records_safe'").unwrap(),
            "m"
        );
        // Protected columns differ, the others are equal, nothing is lost.
        assert_eq!(count("SELECT count(*) FROM records_safe"), 50);
        assert_eq!(count("SELECT count(*) FROM records r JOIN records_safe s USING (id) WHERE s.note = r.note"), 0);
        assert_eq!(
            count("SELECT count(*) FROM records_safe WHERE name <> '<PERSON>'"),
            0
        );
        assert_eq!(count("SELECT count(*) FROM records r JOIN records_safe s USING (id) WHERE s.visits = r.visits"), 50);
        assert_eq!(
            one("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'records_safe'::regclass AND attname = 'name'").unwrap(),
            "character varying(40)"
        );
        // The same rule as the function: keyed outputs match.
        assert_eq!(
            count("SELECT count(*) FROM records r JOIN records_safe s USING (id) WHERE s.note = santext(r.note, 3)"),
            50
        );
        // Provenance: one row per rule, with the key's id, never the key.
        assert_eq!(
            one("SELECT string_agg(column_name || ':' || mechanism || ':' || randomness || ':' || event, ',' ORDER BY column_name) FROM dptext.provenance").unwrap(),
            "name:deidentify:keyed:create,note:santext:keyed:create"
        );
        let key_id = one("SELECT dptext.randomness() ->> 'key_id'").unwrap();
        assert_eq!(
            count(&format!(
                "SELECT count(*) FROM dptext.provenance WHERE random_id = '{key_id}'"
            )),
            2
        );
        assert_eq!(
            count("SELECT count(*) FROM dptext.provenance WHERE assets ? 'glove-6b-50d'"),
            2
        );
        let all = one("SELECT string_agg(p::text, ' ') FROM dptext.provenance p").unwrap();
        assert!(!all.contains("sanitized view test"), "{all}");
        let comment = one("SELECT obj_description('records_safe'::regclass)").unwrap();
        assert!(
            comment.contains("note: MASKED WITH santext(") && comment.contains(&key_id),
            "{comment}"
        );
        // REFRESH re-runs the rules: keyed, unchanged rows stay unchanged; recorded.
        Spi::run("CREATE TABLE before AS SELECT * FROM records_safe; UPDATE records SET note = 'A new note.' WHERE id = 1; REFRESH MATERIALIZED VIEW records_safe").unwrap();
        assert_eq!(count("SELECT count(*) FROM before b JOIN records_safe s USING (id) WHERE s.note = b.note"), 49);
        assert_eq!(
            count("SELECT count(*) FROM dptext.provenance WHERE event = 'refresh'"),
            2
        );
        // Same key, same rule: still one release per column.
        assert_eq!(
            one("SELECT string_agg(column_name || '=' || releases || '/' || eps_total, ',' ORDER BY column_name) FROM dptext.budget").unwrap(),
            "name=1/0,note=1/3"
        );
        // A rebuild without a key is a new release; a plain view without one is unbounded.
        Spi::run("RESET dptext.key").unwrap();
        Spi::run("SELECT dptext.create_sanitized_view('records', 'records_safe2')").unwrap();
        assert_eq!(
            one("SELECT eps_total::text FROM dptext.budget WHERE column_name = 'note'").unwrap(),
            "6"
        );
        Spi::run("SET client_min_messages = error; SELECT dptext.create_sanitized_view('records', 'public.records_v', materialized => false)").unwrap();
        assert_eq!(
            one("SELECT relkind::text FROM pg_class WHERE relname = 'records_v'").unwrap(),
            "v"
        );
        assert_eq!(one("SELECT unbounded::text || ' ' || eps_total FROM dptext.budget WHERE column_name = 'note'").unwrap(), "true Infinity");
    }

    #[pg_test]
    fn sanitized_view_needs_a_rule_and_a_free_name() {
        Spi::run("CREATE TABLE plain (a text)").unwrap();
        let err = error_of("SELECT dptext.create_sanitized_view('plain', 'plain_safe')").unwrap();
        assert!(
            err.contains("no dptext rule on any column of plain"),
            "{err}"
        );
        records_with_rules();
        let err = error_of("SELECT dptext.create_sanitized_view('records', 'a.b.c')").unwrap();
        assert!(err.contains("too many dots"), "{err}");
        let err = error_of("SELECT dptext.create_sanitized_view('records', 'records')").unwrap();
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(count("SELECT count(*) FROM dptext.provenance"), 0);
    }

    #[pg_test]
    fn the_key_is_hidden_from_other_roles() {
        Spi::run("SET dptext.key = 'correct horse battery staple'; CREATE ROLE dptext_nosuper; GRANT EXECUTE ON FUNCTION dptext.randomness() TO dptext_nosuper; SET ROLE dptext_nosuper").unwrap();
        for sql in ["SHOW dptext.key", "SELECT current_setting('dptext.key')"] {
            match error_of(sql) {
                Some(err) => assert!(!err.contains("horse"), "{err}"),
                None => assert_eq!(one(sql).unwrap(), "********"),
            }
        }
        let settings = one("SELECT coalesce(string_agg(name || '=' || coalesce(setting, ''), ','), '') FROM pg_settings WHERE name LIKE 'dptext.%'").unwrap();
        assert!(!settings.contains("horse"), "{settings}");
        let err = error_of("SET dptext.key = 'another key of sixteen bytes'").unwrap();
        assert!(err.contains("permission denied"), "{err}");
        // Non-superusers may not call the functions until granted.
        let err = error_of("SELECT santext('x', 3)").unwrap();
        assert!(
            err.contains("permission denied for function santext"),
            "{err}"
        );
        assert!(one("SELECT dptext.randomness()::text")
            .unwrap()
            .contains("key_id"));
        Spi::run("RESET ROLE").unwrap();
    }

    #[pg_test]
    fn ndd_scores_edits_and_distortion_replaces_spans() {
        let same = "Masao Yoshikawa was defeated in the match in Hokkaido .";
        assert_eq!(
            one(&format!("SELECT ndd('{same}', '{same}')::text")).unwrap(),
            "0"
        );
        let fit = Spi::get_one::<f64>(&format!(
            "SELECT ndd('{same}', replace('{same}', 'Hokkaido', 'Moscow'))"
        ))
        .unwrap()
        .unwrap();
        let hel = Spi::get_one::<f64>(&format!("SELECT ndd('{same}', replace('{same}', 'Hokkaido', 'Moscow'), mu => 0.5, divergence => 'hellinger')")).unwrap().unwrap();
        assert!(fit > 0.0 && hel > 0.0 && hel < fit, "{fit} {hel}");
        let err = error_of("SELECT ndd('a b', 'a c', divergence => 'js')").unwrap();
        assert!(
            err.contains("\"js\" is not one of 'kl', 'hellinger'"),
            "{err}"
        );
        let err = error_of("SELECT ndd('a b', 'a c', mu => 0)").unwrap();
        assert!(err.contains("must be in (0, 1]"), "{err}");

        Spi::run("SET dptext.seed = 5").unwrap();
        let t =
            "Kathryn Herrera was admitted to St. Mary''s Hospital on May 3, 2024. She went home.";
        let out = one(&format!("SELECT ndd_distort('{t}')")).unwrap();
        assert!(
            !out.contains("Kathryn") && !out.contains("Herrera") && !out.contains("May 3, 2024"),
            "{out}"
        );
        assert!(out.ends_with("She went home."), "{out}");
        assert_eq!(
            Some(out),
            one(&format!("SELECT ndd_distort('{t}')")),
            "seeded runs repeat"
        );
        let gen = one(&format!(
            "SELECT ndd_distort('{t}', 'generative', candidates => 2)"
        ))
        .unwrap();
        assert!(!gen.contains("Kathryn Herrera"), "{gen}");
        let cost = one(&format!("SELECT sanitize('{t}', 'ndd', '{{\"candidates\": 2}}') -> 'cost' -> 'guarantee' ->> 'kind'")).unwrap();
        assert_eq!(cost, "none");
        let err = error_of("SELECT ndd_distort('x', candidates => 0)").unwrap();
        assert!(err.contains("must be in [1, 64], got 0"), "{err}");
        let err = error_of("SELECT ndd_distort('x', 'creative')").unwrap();
        assert!(
            err.contains("is not one of 'substitutive', 'generative'"),
            "{err}"
        );
    }

    #[pg_test]
    fn ndd_on_cuda_without_a_gpu_runs_on_the_cpu() {
        let q = "SELECT ndd('The patient was seen on Monday.', 'The patient was seen on Friday.')";
        let cpu = Spi::get_one::<f64>(q).unwrap().unwrap();
        Spi::run("SET dptext.device = 'cuda'").unwrap();
        let gpu = Spi::get_one::<f64>(q).unwrap().unwrap();
        assert!((cpu - gpu).abs() < 1e-9 * cpu.max(1.0), "{cpu} vs {gpu}");
        Spi::run("SET dptext.device = 'tpu'").unwrap();
        let err = error_of(q).unwrap();
        assert!(err.contains("\"tpu\" is not one of 'cpu', 'cuda'"), "{err}");
    }

    /// The detection model follows `dptext.device` as the masked LM does:
    /// on a machine where CUDA cannot start, `deidentify` runs on the CPU
    /// (the fallback counted, a WARNING) and gives the CPU's text.
    #[pg_test]
    fn deidentify_on_cuda_without_a_gpu_runs_on_the_cpu() {
        Spi::run("SET dptext.seed = 7").unwrap();
        let q = "SELECT deidentify('Call John Smith at (555) 123-4567 about Boston.')";
        let cpu = Spi::get_one::<String>(q).unwrap().unwrap();
        assert!(!cpu.contains("John Smith"), "{cpu}");
        let before = dptext_core::runtime::fallback_count();
        Spi::run("SET dptext.device = 'cuda'").unwrap();
        let gpu = Spi::get_one::<String>(q).unwrap().unwrap();
        if !cfg!(feature = "cuda") {
            assert!(dptext_core::runtime::fallback_count() > before);
            assert_eq!(cpu, gpu);
        }
    }

    #[pg_test]
    fn missing_model_names_its_directory() {
        Spi::run("SET dptext.mlm_model = '/nonexistent/model'").unwrap();
        let err = error_of("SELECT ndd('a b', 'a c')").unwrap();
        assert!(err.contains("/nonexistent/model/model.onnx"), "{err}");
    }

    /// A long detection stops within a second or two of a cancel (before:
    /// 33 s late for 100 KB). The cancel is raised as its signal handler
    /// does (`SET statement_timeout` inside a running statement arms
    /// nothing); tests/sql covers a real statement_timeout.
    #[pg_test]
    fn a_cancel_stops_a_long_call() {
        Spi::run("SET dptext.max_detect_bytes = 64000000").unwrap();
        if error_of("SELECT count(*) FROM detect_pii('warm up')").is_some() {
            return; // no detection model installed
        }
        crate::pg::interrupts::cancel_after(1000);
        let started = std::time::Instant::now();
        let failure = failure_of("SELECT count(*) FROM detect_pii((SELECT string_agg(md5(i::text), ' ') FROM generate_series(1, 60000) i))");
        let late = started
            .elapsed()
            .saturating_sub(std::time::Duration::from_secs(1));
        pgrx::notice!(
            "detect_pii stopped {} ms after the timeout",
            late.as_millis()
        );
        let (code, message) = failure.expect("the call was cancelled");
        assert_eq!(code, PgSqlErrorCode::ERRCODE_QUERY_CANCELED, "{message}");
        assert!(late < std::time::Duration::from_secs(2), "{late:?} late");
    }

    /// Every path that runs detection holds its input to
    /// dptext.max_detect_bytes (before: deidentify, sanitize(.., 'ndd') and
    /// apply_rule did not; ndd_distort refused what sanitize accepted).
    #[pg_test]
    fn every_detection_path_enforces_max_detect_bytes() {
        Spi::run("SET dptext.max_detect_bytes = 10").unwrap();
        for sql in [
            "SELECT count(*) FROM detect_pii(repeat('a', 20))",
            "SELECT deidentify(repeat('a', 20))",
            "SELECT sanitize(repeat('a', 20), 'deidentify', '{}')::text",
            "SELECT sanitize(repeat('a', 20), 'ndd', '{}')::text",
            "SELECT dptext.apply_rule(repeat('a', 20), 'deidentify', '{}')",
            "SELECT dptext.apply_rule(repeat('a', 20), 'ndd', '{}')",
            "SELECT ndd_distort(repeat('a', 20))",
            "SELECT ndd(repeat('a', 20), 'a')",
        ] {
            let (code, message) = failure_of(sql).expect(sql);
            // Without the models the build fails first (58P01); with them,
            // the limit (54000).
            if code == PgSqlErrorCode::ERRCODE_UNDEFINED_FILE {
                continue;
            }
            assert_eq!(
                code,
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                "{sql}: {message}"
            );
            assert_eq!(
                message, "input of 20 bytes exceeds the limit of 10 bytes",
                "{sql}"
            );
        }
        // Word mechanisms are held to max_input_bytes only.
        assert!(one("SELECT santext(repeat('a ', 10), 3)").is_some());
    }

    /// jsonb parameters out of serde's reach are 22023 naming the parameter
    /// (before: XX000).
    #[pg_test]
    fn out_of_range_and_deep_json_parameters_are_invalid_values() {
        let (code, message) =
            failure_of("SELECT sanitize('x', 'santext', '{\"eps\": 1e400}')").unwrap();
        assert_eq!(
            code,
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "{message}"
        );
        assert!(
            message.starts_with("invalid value for parameter \"eps\": number out of range"),
            "{message}"
        );
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for sql in [
            format!("SELECT sanitize('x', 'santext', '{{\"eps\": {deep}}}')"),
            format!("SELECT dptext.apply_rule('x', 'santext', '{{\"eps\": {deep}}}')"),
        ] {
            let (code, message) = failure_of(&sql).unwrap();
            assert_eq!(
                code,
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                "{message}"
            );
            assert!(
                message.contains("nested more than 128 levels deep"),
                "{message}"
            );
        }
    }

    /// This test database is UTF8: the check lets every function through.
    #[pg_test]
    fn a_utf8_database_passes_the_encoding_check() {
        assert_eq!(crate::pg::interrupts::non_utf8_encoding(), None);
        Spi::run("SET dptext.seed = 1").unwrap();
        assert!(one("SELECT santext('café déjà vu', 3)").is_some());
    }

    /// A label on a column of another type names the type.
    #[pg_test]
    fn labels_on_other_types_name_the_type() {
        Spi::run("CREATE TABLE typed (n integer)").unwrap();
        let (code, message) = failure_of(
            "SECURITY LABEL FOR dptext ON COLUMN typed.n IS 'MASKED WITH santext(eps => 3)'",
        )
        .unwrap();
        assert_eq!(code, PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED);
        assert_eq!(
            message,
            "dptext rules apply to text, varchar and char columns, not to type integer"
        );
    }
}
