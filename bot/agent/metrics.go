package agent

import (
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/nomoshq/nomos/internal/metrics"
)

// timeRequests records how long each HTTP request to the model takes,
// retries included one by one.
func timeRequests(m *metrics.Metrics) option.Middleware {
	return func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		start := time.Now()
		resp, err := next(req)
		result := metrics.ResultOK
		if err != nil || resp.StatusCode >= 400 {
			result = metrics.ResultError
		}
		m.LLMRequest(result, time.Since(start))
		return resp, err
	}
}

// countTokens adds what a completion reports it used.
func (a *Agent) countTokens(resp *openai.ChatCompletion) {
	if resp != nil {
		a.cfg.Metrics.LLMTokens(resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	}
}
