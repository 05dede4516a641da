//! Chat prompts: the model's own chat template (Jinja, from `tokenizer_config.json` or GGUF
//! metadata) rendered with minijinja, or, for models without one (dummy weights), ChatML:
//!
//! ```text
//! <|im_start|>{role}\n{content}<|im_end|>\n      (each message)
//! <|im_start|>assistant\n                        (the generation prompt)
//! ```

use crate::openai::{ApiError, Message};

pub struct ChatTemplate {
    env: Option<minijinja::Environment<'static>>,
}

impl ChatTemplate {
    /// `template`: the model's Jinja chat template, if it has one.
    pub fn new(template: Option<String>) -> Result<Self, crate::ServerError> {
        let Some(t) = template else { return Ok(ChatTemplate { env: None }) };
        let mut env = minijinja::Environment::new();
        env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", t).map_err(crate::ServerError::ChatTemplate)?;
        Ok(ChatTemplate { env: Some(env) })
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
                    bos_token => "",
                    eos_token => "",
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
}
