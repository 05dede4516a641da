//! Chat prompts: the model's own chat template (Jinja, from `tokenizer_config.json` or GGUF
//! metadata) rendered with minijinja, or, for models without one (dummy weights), ChatML:
//!
//! ```text
//! <|im_start|>{role}\n{content}<|im_end|>\n      (each message)
//! <|im_start|>assistant\n                        (the generation prompt)
//! ```

use crate::openai::{ApiError, Message};
use goodput_engine::loader::ChatFormat;

/// Templates run with Python's string methods (`.startswith`, `.split`, `.strip`, …: Qwen's
/// and DeepSeek's use them, through minijinja-contrib's pycompat), `raise_exception`, and the
/// model's `bos_token` and `eos_token`.
pub struct ChatTemplate {
    env: Option<minijinja::Environment<'static>>,
    bos_token: String,
    eos_token: String,
}

impl ChatTemplate {
    /// `template`: the model's Jinja chat template, if it has one (no special tokens).
    pub fn new(template: Option<String>) -> Result<Self, crate::ServerError> {
        Self::from_format(ChatFormat { template, ..Default::default() })
    }

    /// The model's template with its special tokens.
    pub fn from_format(f: ChatFormat) -> Result<Self, crate::ServerError> {
        let (bos_token, eos_token) = (f.bos_token, f.eos_token);
        let Some(t) = f.template else { return Ok(ChatTemplate { env: None, bos_token, eos_token }) };
        let mut env = minijinja::Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", t).map_err(crate::ServerError::ChatTemplate)?;
        Ok(ChatTemplate { env: Some(env), bos_token, eos_token })
    }

    pub fn is_model_s(&self) -> bool {
        self.env.is_some()
    }

    pub fn render(&self, messages: &[Message]) -> Result<String, ApiError> {
        let msgs: Vec<(String, String)> =
            messages.iter().map(|m| Ok((m.role.clone(), m.content.text()?))).collect::<Result<_, ApiError>>()?;
        match &self.env {
            None => {
                let mut s = String::new();
                for (role, content) in &msgs {
                    s.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
                }
                s.push_str("<|im_start|>assistant\n");
                Ok(s)
            }
            Some(env) => {
                let ctx = minijinja::context! {
                    messages => msgs.iter().map(|(r, c)| minijinja::context! { role => r, content => c }).collect::<Vec<_>>(),
                    add_generation_prompt => true,
                    bos_token => &self.bos_token,
                    eos_token => &self.eos_token,
                };
                env.get_template("chat").and_then(|t| t.render(ctx)).map_err(|e| {
                    ApiError::bad_request(format!("the chat template refused the messages: {e}"), Some("messages"))
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::Content;

    fn msg(role: &str, text: &str) -> Message {
        Message { role: role.into(), content: Content::Text(text.into()) }
    }

    #[test]
    fn chatml_fallback_and_a_jinja_template() {
        let plain = ChatTemplate::new(None).unwrap();
        assert_eq!(
            plain.render(&[msg("system", "Be brief."), msg("user", "Hi")]).unwrap(),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let t = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}";
        let jinja = ChatTemplate::new(Some(t.into())).unwrap();
        assert_eq!(jinja.render(&[msg("user", "Hi")]).unwrap(), "[user] Hi\n[assistant] ");
        let raising = ChatTemplate::new(Some("{{ raise_exception('no system role') }}".into())).unwrap();
        assert!(raising.render(&[msg("user", "Hi")]).unwrap_err().message.contains("no system role"));
        assert!(ChatTemplate::new(Some("{% for %}".into())).is_err());
    }

    #[test]
    fn python_string_methods_and_the_model_s_special_tokens() {
        // Llama 3's opening and Qwen's / DeepSeek's Python string methods.
        let t = "{{ bos_token }}{% for m in messages %}{% if m.content.startswith('/') %}[cmd]{% endif %}\
                 {{ m.role }}:{{ m.content.split(' ')[0] }}|{{ m.content.strip().upper() }}{{ eos_token }}\n{% endfor %}\
                 {{ messages | tojson | length > 0 }}";
        // (Booleans print as Python prints them.)
        let f = ChatFormat {
            template: Some(t.into()),
            bos_token: "<|begin_of_text|>".into(),
            eos_token: "<|eot_id|>".into(),
        };
        let chat = ChatTemplate::from_format(f).unwrap();
        assert_eq!(
            chat.render(&[msg("user", " hi there "), msg("user", "/reset now")]).unwrap(),
            "<|begin_of_text|>user:|HI THERE<|eot_id|>\n[cmd]user:/reset|/RESET NOW<|eot_id|>\nTrue"
        );
    }
}
