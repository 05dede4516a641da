//! The tests of [`super`].
use super::*;

fn file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("goodput-trace-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn azure_timestamps_are_seconds_since_1970() {
    assert_eq!(parse_timestamp("1970-01-01 00:00:01"), Some(1.0));
    // 2023-11-16 is day 19 677 since 1970.
    let t = parse_timestamp("2023-11-16 18:15:46.6805900").unwrap();
    assert!((t - (19_677.0 * 86_400.0 + 18.0 * 3600.0 + 15.0 * 60.0 + 46.68059)).abs() < 1e-6, "{t}");
    assert_eq!(parse_timestamp("2024-02-29T00:00:00Z"), Some(19_782.0 * 86_400.0));
    assert_eq!(parse_timestamp("2023-13-01 00:00:00"), None);
    for impossible in ["2023-02-31 00:00:00", "2023-02-29 00:00:00", "2023-04-31 00:00:00", "2023-01-01 -1:00:00"] {
        assert_eq!(parse_timestamp(impossible), None, "{impossible}");
    }
    assert_eq!(parse_timestamp("99999999999999999-01-01 00:00:00"), None, "no overflow");
    assert_eq!(parse_timestamp("yesterday"), None);
}

#[test]
fn mooncake_blocks_share_prefixes_by_hash_id_and_the_window_cuts() {
    let text = "{\"timestamp\": 1000, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [7, 8, 9]}\n\
                {\"timestamp\": 0, \"input_length\": 9, \"output_length\": 3, \"hash_ids\": [7, 8, 5]}\n\
                {\"timestamp\": 2500, \"input_length\": 900, \"output_length\": 3, \"hash_ids\": []}\n";
    let all = read(&file("m.jsonl", text), TraceFormat::Auto).unwrap();
    assert_eq!(all.iter().map(|e| e.at_s).collect::<Vec<_>>(), [0.0, 1.0, 2.5], "sorted, from the first");
    let opts = TraceOptions { window: (0.0, None), block_size: 4 };
    let t = Trace::new("m".into(), all.clone(), opts, 512, 1).unwrap();
    assert_eq!((t.entries.len(), t.too_long), (2, 1), "900 + 3 tokens exceed 512");
    let (a, b) = (t.request(100, 0, 1000), t.request(101, 1, 1000));
    assert_eq!((a.prompt.len(), b.prompt.len()), (9, 10));
    // Blocks 7 and 8: the first 8 tokens agree; block 5 and block 9 differ.
    assert_eq!(a.prompt[..8], b.prompt[..8]);
    assert_ne!(a.prompt[8], b.prompt[8]);
    assert_eq!((t.due(1, 2.0), t.rate()), (0.5, 2.0));
    assert!(t.shares_prefixes(), "7 and 8 in both");
    let late = Trace::new("m".into(), all, TraceOptions { window: (0.5, Some(3.0)), block_size: 4 }, 4096, 1).unwrap();
    assert_eq!(late.entries.iter().map(|e| e.at_s).collect::<Vec<_>>(), [0.5, 2.0]);
    // One request left in the window: nothing shared, even with a repeated id.
    let once = "{\"timestamp\": 0, \"input_length\": 9, \"output_length\": 3, \"hash_ids\": [7, 7, 5]}\n";
    let t = Trace::new("m".into(), read(&file("o.jsonl", once), TraceFormat::Auto).unwrap(), opts_of(4), 512, 1);
    assert!(!t.unwrap().shares_prefixes());
}

#[test]
fn sessions_link_their_turns_in_order_with_their_waits() {
    // Session "a": at 0, then 250 ms after turn 1 ended, then at its own time (2 s); session
    // 7 at 1 s; a request of no session at 0.5 s.
    let text = r#"{"session_id": "a", "timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1, 2]}
{"session_id": 7, "timestamp": 1000, "input_length": 8, "output_length": 2, "hash_ids": [9, 10]}
{"session_id": "a", "delay": 250, "input_length": 12, "output_length": 2, "hash_ids": [1, 2, 3]}
{"timestamp": 500, "input_length": 4, "output_length": 2}
{"session_id": "a", "timestamp": 2000, "input_length": 16, "output_length": 2, "hash_ids": [1, 2, 3, 4]}
"#;
    let all = read(&file("s.jsonl", text), TraceFormat::Auto).unwrap();
    let order: Vec<(f64, Option<u64>)> = all.iter().map(|e| (e.at_s, e.session)).collect();
    assert_eq!(order, [(0.0, Some(0)), (0.25, Some(0)), (0.5, None), (1.0, Some(1)), (2.0, Some(0))]);
    let t = Trace::new("s".into(), all, opts_of(4), 512, 1).unwrap();
    assert_eq!(t.sessions, 2);
    let turns: Vec<Option<(u64, u32)>> = (0..5).map(|i| t.turn(i)).collect();
    assert_eq!(turns, [Some((0, 1)), Some((0, 2)), None, Some((1, 1)), Some((0, 3))]);
    assert_eq!(t.next_turn(0), Some((1, NextDue::After(0.25))));
    assert_eq!(t.next_turn(1), Some((4, NextDue::At(2.0))));
    assert_eq!((t.next_turn(2), t.next_turn(3), t.next_turn(4)), (None, None, None));
    // A replay past the window takes the sessions again, numbered on; a request its session.
    assert_eq!((t.turn(5), t.next_turn(6)), (Some((2, 1)), Some((9, NextDue::At(2.0)))));
    assert_eq!((t.request(100, 1, 1000).session, t.request(102, 2, 1000).session), (Some(0), None));
    // The turns share their session's blocks: turn 2 starts with turn 1's prompt.
    assert_eq!(t.request(100, 0, 1000).prompt[..], t.request(101, 1, 1000).prompt[..8]);
    for (bad, said) in [
        (
            r#"{"session_id": "b", "delay": 5, "input_length": 8, "output_length": 2}"#,
            "session b starts without a timestamp",
        ),
        (r#"{"input_length": 8, "output_length": 2}"#, "no timestamp"),
        (r#"{"session_id": [1], "timestamp": 0, "input_length": 8, "output_length": 2}"#, "is not a string or number"),
        (
            r#"{"session_id": 1, "timestamp": 0, "delay": -1, "input_length": 8, "output_length": 2}"#,
            "the delay is not",
        ),
    ] {
        let e = read(&file("bad.jsonl", &format!("{bad}\n")), TraceFormat::Mooncake).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains(said), "{e}");
    }
}

#[test]
fn a_subagent_starts_after_its_callers_turn_and_the_caller_waits_for_it() {
    let text = r#"{"session_id": "main", "timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1]}
{"session_id": "sub", "parent_session_id": "main", "delay": 50, "input_length": 8, "output_length": 2, "hash_ids": [7]}
{"session_id": "sub", "delay": 10, "input_length": 12, "output_length": 2, "hash_ids": [7, 8]}
{"session_id": "main", "delay": 100, "input_length": 12, "output_length": 2, "hash_ids": [1, 2]}
"#;
    let all = read(&file("sub.jsonl", text), TraceFormat::Auto).unwrap();
    let at: Vec<f64> = all.iter().map(|e| (e.at_s * 1e3).round()).collect();
    assert_eq!(at, [0.0, 50.0, 60.0, 150.0], "the caller's next turn after its subagent's first");
    assert_eq!(all.iter().map(|e| e.parent).collect::<Vec<_>>(), [None, Some(0), None, None]);
    let t = Trace::new("sub".into(), all, opts_of(4), 512, 1).unwrap();
    assert_eq!(t.sessions, 2);
    assert_eq!((0..4).map(|i| t.follows(i)).collect::<Vec<_>>(), [false, true, true, true]);
    assert_eq!((t.calls(0), t.calls(1)), (vec![(1, 0.05)], vec![]));
    assert_eq!((t.next_turn(0), t.next_turn(1)), (Some((3, NextDue::After(0.1))), Some((2, NextDue::After(0.01)))));
    assert_eq!((t.turn(1), t.turn(3)), (Some((1, 1)), Some((0, 2))));
    let orphan =
        r#"{"session_id": "sub", "parent_session_id": "nobody", "delay": 5, "input_length": 8, "output_length": 2}"#;
    let e = read(&file("orphan.jsonl", &format!("{orphan}\n")), TraceFormat::Mooncake).unwrap_err().to_string();
    assert!(e.contains("the parent session nobody has no turn before its subagent sub"), "{e}");
}

fn opts_of(block_size: usize) -> TraceOptions {
    TraceOptions { window: (0.0, None), block_size }
}

#[test]
fn azure_csv_rows_and_refusals_by_row() {
    let text = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
                2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n";
    let all = read(&file("a.csv", text), TraceFormat::Auto).unwrap();
    assert_eq!(all.len(), 2);
    assert!(!Trace::new("a".into(), all.clone(), opts_of(16), 4096, 1).unwrap().shares_prefixes());
    assert!((all[1].at_s - 4.314579).abs() < 1e-6 && all[1].input == 396 && all[1].output == 109);
    let bad = "TIMESTAMP,ContextTokens,GeneratedTokens\nnot a time,1,1\n";
    assert!(read(&file("b.csv", bad), TraceFormat::Azure).unwrap_err().to_string().contains("row 1"));
    let err = read(&file("c.jsonl", "{\"timestamp\": 1}\n"), TraceFormat::Mooncake).unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");
}

#[test]
fn boundary_lengths_are_left_out_not_wrapped() {
    let max = u64::MAX;
    let text = format!(
        "{{\"timestamp\":0,\"input_length\":{max},\"output_length\":1}}\n\
         {{\"timestamp\":1,\"input_length\":1,\"output_length\":{max}}}\n\
         {{\"timestamp\":2,\"input_length\":3,\"output_length\":4}}\n"
    );
    let all = read(&file("max.jsonl", &text), TraceFormat::Auto).unwrap();
    let t = Trace::new("max".into(), all, TraceOptions { window: (0.0, None), block_size: 4 }, 2048, 1).unwrap();
    assert_eq!((t.entries.len(), t.too_long), (1, 2));
    let far = "{\"timestamp\":0,\"input_length\":1,\"output_length\":1}\n\
               {\"timestamp\":1e300,\"input_length\":1,\"output_length\":1}\n";
    let err = read(&file("far.jsonl", far), TraceFormat::Auto).unwrap_err().to_string();
    assert!(err.contains("at most a year"), "{err}");
    let neg = "{\"timestamp\":-5,\"input_length\":1,\"output_length\":1}\n";
    assert!(read(&file("neg.jsonl", neg), TraceFormat::Auto).is_err());
}

#[test]
fn a_prompt_given_as_text_is_sent_in_the_models_tokens_and_cut_to_its_context() {
    let text = r#"{"session_id": "a", "timestamp": 0, "text_input": "one two three", "output_length": 2}
{"session_id": "a", "delay": 10, "text_input": "one two three four five six seven eight nine", "output_length": 2}
{"timestamp": 5, "input_length": 4, "output_length": 2, "hash_ids": [1]}
"#;
    let all = read(&file("text.jsonl", text), TraceFormat::Auto).unwrap();
    assert_eq!(all[0].input, 13, "bytes, until tokenized");
    let t = Trace::new("t".into(), all, opts_of(4), 10, 1).unwrap();
    assert_eq!((t.entries.len(), t.too_long), (3, 0), "a long text is cut once tokenized, not left out");
    assert!(t.has_text());
    // A word a token: 3 tokens; 9 cut to 8 (10 − 2 of output).
    let words = |s: &str| Ok::<_, String>(s.split(' ').map(|w| w.len() as u32).collect::<Vec<u32>>());
    let tok = t.tokenized(words).unwrap();
    assert_eq!((tok.request(100, 0, 1000).prompt, tok.entries[0].input), (vec![3, 3, 5], 3));
    assert_eq!((tok.request(102, 2, 1000).prompt.len(), tok.cut), (8, 1));
    assert_eq!(tok.request(101, 1, 1000).prompt.len(), 4, "hash blocks as before");
    assert_eq!(tok.request(102, 2, 1000).session, Some(0));
    let e = read(&file("neither.jsonl", "{\"timestamp\": 0, \"output_length\": 2}\n"), TraceFormat::Mooncake);
    assert!(e.unwrap_err().to_string().contains("neither input_length nor text_input"));
    assert!(t.tokenized(|_| Err("no tokenizer")).unwrap_err().to_string().contains("no tokenizer"));
}
