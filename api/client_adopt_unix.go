// SPDX-License-Identifier: Apache-2.0

//go:build unix

package api

import (
	"context"
	"net/http"
)

// Adopt asks the daemon to confine the running process req.PID, and what
// it starts from then on, in a new session, and returns that session.
func (c *Client) Adopt(ctx context.Context, req AdoptRequest) (SessionInfo, error) {
	var out SessionInfo
	return out, c.do(ctx, http.MethodPost, "/v1/sessions/adopt", req, &out)
}
