// SPDX-License-Identifier: Apache-2.0

//go:build unix

package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/sluice-dev/sluice/prompts"
)

// Prompt is a pending ask-mode prompt (GET /v1/prompts).
type Prompt = prompts.Prompt

// Prompts lists the pending prompts the caller may answer.
func (c *Client) Prompts(ctx context.Context) ([]Prompt, error) {
	var out []Prompt
	return out, c.do(ctx, http.MethodGet, "/v1/prompts", nil, &out)
}

// FollowPrompts calls fn with the pending prompts, then with every prompt
// raised or settled, until ctx ends.
func (c *Client) FollowPrompts(ctx context.Context, fn func(Prompt)) error {
	return follow(ctx, c, "/v1/prompts/stream", fn)
}

// AnswerPrompt answers the pending prompt id.
func (c *Client) AnswerPrompt(ctx context.Context, id string, a PromptAnswer) (Prompt, error) {
	var out Prompt
	return out, c.do(ctx, http.MethodPost, "/v1/prompts/"+url.PathEscape(id), a, &out)
}
