package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/nomoshq/nomos/mcpserver"
	"github.com/nomoshq/nomos/mcpserver/proxy"
)

// checkLLM asks the endpoint for its models, with the bot's key and
// headers, and looks for llm.model among them.
func (d *doctor) checkLLM(ctx context.Context) []checkLine {
	l := d.cfg.LLM
	endpoint := strings.TrimRight(l.BaseURL, "/") + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return []checkLine{fail("llm: "+err.Error(), "set llm.base_url to the endpoint's OpenAI-compatible base URL, such as https://openrouter.ai/api/v1")}
	}
	for k, v := range l.Headers {
		req.Header.Set(k, v)
	}
	if l.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+l.APIKey)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return []checkLine{fail("llm: "+endpoint+" does not answer: "+err.Error(), "check llm.base_url, and that this machine can reach it")}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return []checkLine{fail(fmt.Sprintf("llm: %s refuses llm.api_key (%s)", endpoint, resp.Status), "set llm.api_key (or llm.api_key_file) to a key the endpoint accepts")}
	case resp.StatusCode != http.StatusOK:
		return []checkLine{fail(fmt.Sprintf("llm: GET %s answered %s: %s", endpoint, resp.Status, bytes.TrimSpace(body[:min(len(body), 200)])),
			"check llm.base_url: it is the part before /chat/completions")}
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		return []checkLine{pass(fmt.Sprintf("llm: %s answers; it lists no models, so llm.model %s is not confirmed", endpoint, l.Model))}
	}
	for _, m := range list.Data {
		if m.ID == l.Model {
			return []checkLine{pass(fmt.Sprintf("llm: %s answers and offers %s", endpoint, l.Model))}
		}
	}
	return []checkLine{fail(fmt.Sprintf("llm: %s does not offer llm.model %s among its %d models", endpoint, l.Model, len(list.Data)),
		"set llm.model to a model id it lists (GET "+endpoint+")")}
}

// checkMCP checks the tokens this machine's config holds: the bot's
// mcp.tokens are well formed, the client token is long enough and, when
// both sides are here, one the bot accepts; and the bot's endpoint takes
// the client token.
func (d *doctor) checkMCP(ctx context.Context) []checkLine {
	m := d.cfg.MCP
	var lines []checkLine
	names := map[[32]byte]string{}
	var bad []string
	for i, t := range m.Tokens {
		sum, err := mcpserver.ParseTokenHash(t.TokenSHA256)
		if err != nil {
			bad = append(bad, fmt.Sprintf("mcp.tokens[%d] (%s): %v", i, t.Name, err))
			continue
		}
		names[sum] = t.Name
	}
	if m.Token != "" {
		if len(m.Token) < mcpserver.MinTokenLength {
			bad = append(bad, fmt.Sprintf("mcp.token is shorter than %d characters", mcpserver.MinTokenLength))
		}
		names[mcpserver.HashToken(m.Token)] = mcpserver.LegacyTokenName
	}
	switch {
	case len(bad) > 0:
		lines = append(lines, fail("mcp tokens: "+strings.Join(bad, "; "), "make each token with `nomos mcp token NAME` and paste the line it prints under mcp.tokens"))
	case len(m.Tokens) > 0 || m.Token != "":
		text := fmt.Sprintf("mcp tokens: %d well formed", len(names))
		if m.Token != "" {
			text += " (mcp.token is deprecated, and may only read: move it to mcp.tokens)"
		}
		lines = append(lines, pass(text))
	}
	if owners := m.ReadOnlyRequestTokens(); len(owners) > 0 {
		lines = append(lines, fail("mcp tokens: "+strings.Join(owners, ", ")+" ask for scope request but name nobody they are for, so they may only read",
			"add for: \"@user:server\" to each, naming the person who uses it (their plans are then on that person's behalf), or make a new one with `nomos mcp token -scope request -for @user:server NAME`"))
	}
	if m.ClientToken == "" && m.URL == "" {
		return lines
	}
	if len(m.ClientToken) < mcpserver.MinTokenLength {
		return append(lines, fail(fmt.Sprintf("mcp client: mcp.client_token is shorter than %d characters", mcpserver.MinTokenLength),
			"make one with `nomos mcp token NAME`, add its line to the bot's mcp.tokens, and put the token in mcp.client_token_file"))
	}
	if len(names) > 0 {
		name, ok := names[mcpserver.HashToken(m.ClientToken)]
		if !ok {
			return append(lines, fail("mcp client: mcp.client_token is none of the tokens in mcp.tokens, so the bot would refuse it",
				"add the client's token to mcp.tokens (as the line `nomos mcp token NAME` prints), or correct mcp.client_token_file"))
		}
		lines = append(lines, pass("mcp client: mcp.client_token is the token named "+name))
	}
	if m.URL == "" {
		return lines
	}
	p, err := proxy.New(ctx, proxy.Config{URL: m.URL, Token: m.ClientToken, Version: version, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return append(lines, fail("mcp: the bot at "+m.URL+" does not take the client token: "+err.Error(),
			"start the bot with the client's token in its mcp.tokens, and set mcp.url to its web.listen address plus /mcp"))
	}
	n := len(p.Tools())
	p.Close()
	return append(lines, pass(fmt.Sprintf("mcp: the bot at %s takes the client token (%d tools)", m.URL, n)))
}

// checkWeb checks that the bot's status page is served where web.listen
// says, and its /healthz when it has one.
func (d *doctor) checkWeb(ctx context.Context) []checkLine {
	base := publicURL(d.cfg.Web.Listen)
	if base == "" {
		return []checkLine{fail("status page: web.listen "+d.cfg.Web.Listen+" is not host:port", "set web.listen, such as 127.0.0.1:8080")}
	}
	notUp := "start `nomos bot`: it serves the status page on web.listen (" + d.cfg.Web.Listen + "); if it runs, its log says why it could not listen"
	status, body, err := d.get(ctx, base, true)
	found := "answers"
	switch {
	case err != nil:
		return []checkLine{fail("status page: nothing answers at "+base+": "+err.Error(), notUp)}
	case status == http.StatusUnauthorized && d.cfg.Web.Auth.User == "":
		found = "answers and asks for a password"
	case status == http.StatusUnauthorized:
		return []checkLine{fail("status page: "+base+" refuses web.auth's user and password", "the bot and this config disagree on web.auth: restart the bot with this config")}
	case status != http.StatusOK:
		return []checkLine{fail(fmt.Sprintf("status page: %s answers %d", base, status), notUp)}
	case !strings.Contains(body, "· Nomos</title>") && !strings.Contains(body, "Nomos status"):
		return []checkLine{fail("status page: something other than the bot answers at "+base, "stop what listens on "+d.cfg.Web.Listen+", or move web.listen")}
	}
	// A bot from before /healthz answers 404 there.
	switch status, _, err := d.get(ctx, base+"healthz", false); {
	case err != nil:
		return []checkLine{fail("status page: "+base+"healthz does not answer: "+err.Error(), notUp)}
	case status == http.StatusOK:
		found += "; /healthz answers 200"
	case status != http.StatusNotFound:
		return []checkLine{fail(fmt.Sprintf("status page: %shealthz answers %d", base, status), "the bot's log says what is unhealthy")}
	}
	return []checkLine{pass("status page: " + base + " " + found)}
}

func (d *doctor) get(ctx context.Context, u string, auth bool) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	if a := d.cfg.Web.Auth; auth && a.User != "" {
		req.SetBasicAuth(a.User, a.Password)
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), nil
}

// urlPassword is the password embedded in a URL, if any.
func urlPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}
