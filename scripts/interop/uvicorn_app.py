# A vLLM-shaped completions server for scripts/interop-uvicorn.sh.
# A vLLM-shaped completions server on Starlette + uvicorn (vLLM's own stack): SSE through
# StreamingResponse, tokens 5 ms apart, usage in the last chunk when asked.
import asyncio, json, time
from starlette.applications import Starlette
from starlette.responses import StreamingResponse, JSONResponse
from starlette.routing import Route

async def completions(request):
    body = await request.json()
    n = int(body.get("max_tokens", 16))
    async def gen():
        await asyncio.sleep(0.02)
        for i in range(n):
            c = {"id": "cmpl-1", "object": "text_completion", "created": int(time.time()), "model": body["model"],
                 "choices": [{"index": 0, "text": " x", "logprobs": None, "finish_reason": None}]}
            yield f"data: {json.dumps(c)}\n\n"
            await asyncio.sleep(0.005)
        u = {"id": "cmpl-1", "object": "text_completion", "choices": [],
             "usage": {"prompt_tokens": len(body.get("prompt", [])), "completion_tokens": n, "total_tokens": n}}
        yield f"data: {json.dumps(u)}\n\n"
        yield "data: [DONE]\n\n"
    return StreamingResponse(gen(), media_type="text/event-stream")

async def models(request):
    return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]})

app = Starlette(routes=[Route("/v1/completions", completions, methods=["POST"]), Route("/v1/models", models)])
