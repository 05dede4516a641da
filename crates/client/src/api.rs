//! Which API the requests go to, and the body field that carries their output length.

/// Which API the requests go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/completions` with the prompt as token ids (exact lengths; vLLM, SGLang and
    /// goodput accept them).
    Completions,
    /// `POST /v1/completions` with the prompt decoded to text by the client's codec.
    CompletionsText,
    /// `POST /v1/chat/completions` with the prompt decoded to text, as one user message.
    Chat,
    /// `POST /v1/responses` (OpenAI's Responses API) with the prompt decoded to text as its
    /// `input`: streamed as typed events (`response.output_text.delta`,
    /// `response.reasoning_text.delta`, …, `response.completed` with the usage).
    Responses,
}

/// The body field that carries the output length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// Each API's current name: `max_tokens` for completions, `max_completion_tokens` for chat
    /// (OpenAI deprecated `max_tokens` there and refuses it for its reasoning models; vLLM,
    /// SGLang and TGI take both), `max_output_tokens` for responses.
    #[default]
    Auto,
    /// `max_tokens` everywhere but responses (older servers' only chat name).
    MaxTokens,
    /// `max_completion_tokens` for chat; completions and responses keep their own name.
    MaxCompletionTokens,
}

impl MaxTokensField {
    /// The field's name for `api`.
    pub fn name(self, api: Api) -> &'static str {
        match (api, self) {
            (Api::Responses, _) => "max_output_tokens",
            (Api::Chat, MaxTokensField::Auto | MaxTokensField::MaxCompletionTokens) => "max_completion_tokens",
            _ => "max_tokens",
        }
    }
}
