package main

import (
	"debug/elf"
	"strings"
	"testing"
)

// TestBinaryLinksOnlyTheChatService: the nomos binary carries the one
// OpenAI service the agent calls, chat completions, and none of the
// others. text/template's reflection makes the linker keep every exported
// method of a type that reaches an interface, and the bot's types reach
// the agent's; when the agent held the whole OpenAI client, every service
// of the API came along (the binary grew from 76 to 102 MB), and both
// roles paid for the pages of it they touched. This is the binary's
// shape, not its size: a symbol of the Responses service shows the
// whole client linked in again.
func TestBinaryLinksOnlyTheChatService(t *testing.T) {
	t.Parallel()
	f, err := elf.Open(buildNomos(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var chat bool
	for _, s := range syms {
		switch {
		case s.Name == "github.com/openai/openai-go/v3.(*ChatCompletionService).New":
			chat = true
		case strings.HasPrefix(s.Name, "github.com/openai/openai-go/v3/responses.(*ResponseService)."):
			t.Errorf("the binary links %s: the whole OpenAI client is reachable again", s.Name)
			return
		}
	}
	if !chat {
		t.Error("the binary has no (*ChatCompletionService).New: the agent cannot reach the LLM")
	}
}
