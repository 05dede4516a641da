//! Property-based fuzzing of what the server reads from clients: request bodies through
//! `openai::parse::<CompletionRequest>` and `openai::parse::<ChatRequest>`, the messages of
//! chat bodies rendered by `chat::ChatTemplate` (the ChatML fallback and Jinja templates), and
//! chat template texts themselves through `ChatTemplate::new`. Every property is "no panic,
//! bounded in time": each call returns Ok or Err.
//!
//! Inputs are arbitrary bytes and valid OpenAI bodies mutated structurally (fields deleted,
//! renamed or duplicated, values replaced by other types, huge or non-finite numbers, deep
//! nesting, lone surrogates) and then at the byte level (flips, insertions, truncation), by
//! the mutations of `goodput-fuzzing` (`json::mutated`, `mutate_bytes`).
//!
//! Cases: 256 per property (6 properties, about 1,500 cases in all); failures are not
//! persisted (no `proptest-regressions` files).

use goodput_fuzzing::json::mutated;
use goodput_fuzzing::{byte_edits, config, mutate_bytes, small_bytes};
use goodput_server::chat::ChatTemplate;
use goodput_server::openai::{parse, ChatRequest, CompletionRequest, Content, Message};
use proptest::prelude::*;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Seeds: bodies real clients send.

const KEYS: &[&str] = &[
    "model",
    "prompt",
    "messages",
    "role",
    "content",
    "type",
    "text",
    "image_url",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "ignore_eos",
    "min_tokens",
    "stop_token_ids",
    "n",
    "stream",
    "stream_options",
    "include_usage",
    "return_token_ids",
    "system",
    "user",
    "assistant",
];

fn completion_seeds() -> Vec<Value> {
    vec![
        json!({"model": "tiny", "prompt": "Hello", "max_tokens": 16}),
        json!({"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 4, "ignore_eos": true, "temperature": 0}),
        json!({"model": "tiny", "prompt": ["one prompt"], "stream": true, "stream_options": {"include_usage": true}}),
        json!({"model": "tiny", "prompt": [[5, 6, 7]], "max_tokens": 8, "min_tokens": 2, "top_k": -1, "top_p": 0.9,
               "seed": 42, "stop_token_ids": [2], "n": 1, "return_token_ids": true}),
    ]
}

fn chat_seeds() -> Vec<Value> {
    vec![
        json!({"model": "tiny", "messages": [{"role": "user", "content": "Hi"}]}),
        json!({"model": "tiny", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"}
        ], "max_completion_tokens": 32, "stream": true, "stream_options": {"include_usage": true}}),
        json!({"model": "tiny", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Describe "},
            {"type": "text", "text": "this."}
        ]}], "temperature": 0.7, "top_k": 40}),
        json!({"model": "tiny", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:,"}}
        ]}]}),
    ]
}

/// Templates of the shapes models ship (ChatML, Llama 3, one that refuses a system role).
const TEMPLATES: &[&str] = &[
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{{ '<start_of_turn>' + message['role'] + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}",
    "{%- set sys = messages | selectattr('role', 'equalto', 'system') | list -%}{{ sys | length }}{% for m in messages[1:] %}[{{ loop.index }}:{{ m.role | upper }}] {{ m.content[:20] }}{% endfor %}{{ eos_token }}",
];

fn messages() -> Vec<Message> {
    vec![
        Message { role: "system".into(), content: Content::Text("Be brief.".into()) },
        Message { role: "user".into(), content: Content::Text("Hi {{ there }} {% raw %}".into()) },
    ]
}

#[test]
fn the_seed_bodies_and_templates_are_valid() {
    for s in completion_seeds() {
        parse::<CompletionRequest>(s.to_string().as_bytes()).unwrap();
    }
    for s in chat_seeds() {
        parse::<ChatRequest>(s.to_string().as_bytes()).unwrap();
    }
    for t in TEMPLATES {
        let t = ChatTemplate::new(Some(t.to_string())).unwrap();
        let _ = t.render(&messages());
    }
}

/// Renders `messages` with the ChatML fallback: Ok (and then ends with the generation
/// prompt and holds every role), or refused for non-text content.
fn check_chatml(messages: &[Message]) -> Result<(), TestCaseError> {
    let chatml = ChatTemplate::new(None).unwrap();
    if let Ok(text) = chatml.render(messages) {
        prop_assert!(text.ends_with("<|im_start|>assistant\n"));
        for m in messages {
            let needle = format!("<|im_start|>{}\n", m.role);
            prop_assert!(text.contains(&needle));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_are_parsed_or_refused_as_either_body(body in small_bytes(512)) {
        let _ = parse::<CompletionRequest>(&body);
        if let Ok(chat) = parse::<ChatRequest>(&body) {
            check_chatml(&chat.messages)?;
        }
    }

    #[test]
    fn any_text_is_parsed_or_refused_as_either_body(body in "\\PC{0,256}") {
        let _ = parse::<CompletionRequest>(body.as_bytes());
        if let Ok(chat) = parse::<ChatRequest>(body.as_bytes()) {
            check_chatml(&chat.messages)?;
        }
    }

    #[test]
    fn a_completion_body_of_any_shape_is_parsed_or_refused(body in mutated(completion_seeds(), KEYS)) {
        if let Ok(req) = parse::<CompletionRequest>(&body) {
            // What parsed is usable: the sampling fields read without surprise.
            let _ = (req.sampling.max_tokens, req.sampling.max_completion_tokens, req.sampling.n);
        }
        // A completion body sent to the chat endpoint is refused or parsed, never a panic.
        let _ = parse::<ChatRequest>(&body);
    }

    #[test]
    fn a_chat_body_of_any_shape_is_parsed_or_refused_and_renders_in_chatml(body in mutated(chat_seeds(), KEYS)) {
        let _ = parse::<CompletionRequest>(&body);
        if let Ok(chat) = parse::<ChatRequest>(&body) {
            check_chatml(&chat.messages)?;
            for m in &chat.messages {
                let _ = m.content.text();
            }
        }
    }

    #[test]
    fn the_messages_of_any_chat_body_render_through_model_templates_or_are_refused(
        body in mutated(chat_seeds(), KEYS),
        template in prop::sample::select(TEMPLATES.to_vec()),
    ) {
        if let Ok(chat) = parse::<ChatRequest>(&body) {
            let t = ChatTemplate::new(Some(template.to_string())).unwrap();
            let _ = t.render(&chat.messages);
        }
    }

    #[test]
    fn any_template_text_compiles_or_is_refused_and_renders_or_refuses(
        template in prop_oneof![
            "\\PC{0,120}",
            // Fragments of template syntax, shuffled into any order.
            prop::collection::vec(prop::sample::select(vec![
                "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "for m in messages", "endfor", "if", "endif",
                "else", "m.content", "m['role']", "raise_exception('x')", "messages[0]", "| trim", "| upper",
                "loop.index0", "add_generation_prompt", "set x = 1", "x", "(", ")", "[", "]", "'", "\"", " ",
                "range(3)", "macro f()", "endmacro", "f()", "messages | length", "~", "+", "%", "/", "0",
            ]), 0..24).prop_map(|parts| parts.concat()),
            // A real template with bytes edited.
            (prop::sample::select(TEMPLATES.to_vec()), byte_edits())
                .prop_map(|(t, e)| String::from_utf8_lossy(&mutate_bytes(t.as_bytes().to_vec(), &e)).into_owned()),
        ],
    ) {
        if let Ok(t) = ChatTemplate::new(Some(template)) {
            prop_assert!(t.is_model_s());
            let _ = t.render(&messages());
            let _ = t.render(&[]);
        }
    }
}
