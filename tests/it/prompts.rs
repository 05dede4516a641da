//! Prompts as the server counts them (issue 48): a text prompt written so that its length
//! under the server's template and tokenizer is the scenario's.

use crate::common::{run_ok, summary_of, temp};

/// Issue 48: a chat run measured a mean input of 180 tokens for a scenario of 125 (the
/// template and the tokenizer's own count). The client now learns the server's count from
/// `usage.prompt_tokens` and writes the prompt to land on the scenario's length: the same
/// seed's mean input over HTTP chat is the in-process one's within 2 %.
#[test]
fn a_chat_prompt_lands_on_the_scenario_s_length_as_the_server_counts_it() {
    let mean_input = |name: &str, extra: &[&str]| {
        let dir = temp(name);
        let mut args = vec!["--concurrency", "4", "--requests", "80", "--seed", "3", "--refine", "0"];
        args.extend(extra);
        run_ok(&dir, &args);
        let m = summary_of(&dir)["levels"][0]["summary"]["mean_input_tokens"].as_f64().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        m
    };
    let drawn = mean_input("chat-inproc", &[]);
    let chat = mean_input("chat-http", &["--target", "http-local", "--api", "chat"]);
    assert!((chat - drawn).abs() / drawn < 0.02, "chat mean input {chat} against the scenario's {drawn}");
}
