package chatclient

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

type commandKind int

const (
	cmdNone    commandKind = iota // an empty line
	cmdSend                       // text goes to the room as m.text
	cmdReact                      // text is the reaction key
	cmdReply                      // text is the reply
	cmdHelp                       //
	cmdQuit                       //
	cmdUsage                      // text says how to use the command
	cmdUnknown                    // text is the unknown command's name
)

// command is one line typed by the operator.
type command struct {
	kind commandKind
	text string
	// target is the #N the line named, or 0 for the last plan.
	target int
}

const helpText = `Type a line to send it to the room. Commands:
  /react <emoji>         react to the last plan card (✅ or ok approves, ❌ or x denies; 👍 +1, 👎 -1)
  /react #N <emoji>      react to message #N instead
  /reply <text>          reply to the last plan card, e.g. /reply go ahead
  /reply #N <text>       reply to message #N instead
  //text                 send a line that starts with a slash
  /help                  show this
  /quit                  leave (Ctrl-D works too)`

// reactionAliases spare the operator from typing emoji in a terminal.
var reactionAliases = map[string]string{
	"ok": "✅", "yes": "✅", "check": "✅", ":white_check_mark:": "✅", ":heavy_check_mark:": "✅",
	"x": "❌", "no": "❌", ":x:": "❌",
	"+1": "👍", ":+1:": "👍", ":thumbsup:": "👍",
	"-1": "👎", ":-1:": "👎", ":thumbsdown:": "👎",
}

// parseCommand reads one line of input. A line that does not start with a
// slash is a message; "//" sends a line that starts with "/".
func parseCommand(line string) command {
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return command{kind: cmdNone}
	}
	if strings.HasPrefix(line, "//") {
		return command{kind: cmdSend, text: line[1:]}
	}
	if !strings.HasPrefix(line, "/") {
		return command{kind: cmdSend, text: line}
	}
	name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(name) {
	case "/quit", "/exit", "/q":
		return command{kind: cmdQuit}
	case "/help", "/?", "/h":
		return command{kind: cmdHelp}
	case "/react":
		target, key := splitTarget(rest)
		if key == "" || strings.ContainsAny(key, " \t") {
			return command{kind: cmdUsage, text: "usage: /react [#N] <emoji>, e.g. /react ✅"}
		}
		if alias, ok := reactionAliases[strings.ToLower(key)]; ok {
			key = alias
		}
		return command{kind: cmdReact, text: key, target: target}
	case "/reply":
		target, text := splitTarget(rest)
		if text == "" {
			return command{kind: cmdUsage, text: "usage: /reply [#N] <text>, e.g. /reply go ahead"}
		}
		return command{kind: cmdReply, text: text, target: target}
	default:
		return command{kind: cmdUnknown, text: name}
	}
}

// splitTarget takes a leading "#N" off s.
func splitTarget(s string) (int, string) {
	first, rest, _ := strings.Cut(s, " ")
	if len(first) < 2 || first[0] != '#' {
		return 0, s
	}
	n, err := strconv.Atoi(first[1:])
	if err != nil || n <= 0 {
		return 0, s
	}
	return n, strings.TrimSpace(rest)
}

// run carries out one typed line and reports whether to quit.
func (c *client) run(ctx context.Context, cmd command) (quit bool) {
	switch cmd.kind {
	case cmdNone:
	case cmdQuit:
		return true
	case cmdHelp, cmdUsage:
		c.say(cmp.Or(cmd.text, helpText))
	case cmdUnknown:
		c.say(fmt.Sprintf("Unknown command %s; /help lists them.", cmd.text))
	case cmdSend:
		c.send(ctx, "message", event.EventMessage, &event.MessageEventContent{MsgType: event.MsgText, Body: cmd.text})
	case cmdReact:
		if m := c.target(cmd.target); m != nil {
			c.send(ctx, "reaction", event.EventReaction, &event.ReactionEventContent{
				RelatesTo: event.RelatesTo{Type: event.RelAnnotation, EventID: m.id, Key: cmd.text},
			})
		}
	case cmdReply:
		if m := c.target(cmd.target); m != nil {
			c.send(ctx, "reply", event.EventMessage, &event.MessageEventContent{
				MsgType:   event.MsgText,
				Body:      cmd.text,
				RelatesTo: (&event.RelatesTo{}).SetReplyTo(m.id),
				Mentions:  &event.Mentions{UserIDs: []id.UserID{m.sender}},
			})
		}
	}
	return false
}

// target finds the message a /react or /reply is for: #n when n > 0, else
// the bot's last plan card, else the bot's last message. It tells the
// operator when there is none.
func (c *client) target(n int) *message {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > 0 {
		if n > len(c.shown) || c.shown[n-1].deleted {
			c.printf("There is no message #%d.", n)
			return nil
		}
		return c.shown[n-1]
	}
	var last *message
	for i := len(c.order) - 1; i >= 0; i-- {
		m := c.order[i]
		if m.deleted || !c.isBot(m.sender) {
			continue
		}
		if m.plan {
			return m
		}
		if last == nil {
			last = m
		}
	}
	if last == nil {
		c.printf("Nothing from %s to answer yet; use /react #N or /reply #N for another message.", c.botName())
	}
	return last
}

func (c *client) botName() string {
	if c.bot == "" {
		return "the bot"
	}
	return shortName(c.bot)
}

// send sends one event to the room. The operator sees it when it comes
// back through sync; a failure gets a short line, and the cause goes to
// the log.
func (c *client) send(ctx context.Context, what string, typ event.Type, content any) {
	resp, err := c.cli.SendMessageEvent(ctx, c.room, typ, content)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		c.logger.Error("send failed", "what", what, "err", err)
		c.say(fmt.Sprintf("! Could not send the %s; the log says why.", what))
		return
	}
	c.logger.Debug("sent", "what", what, "event_id", resp.EventID)
}

// say prints a line of the client's own.
func (c *client) say(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.printf("%s", s)
}

var (
	riskBadge    = regexp.MustCompile(`(?i)\b(read[ _-]?only|reversible[ _-]?low|config[ _-]?mutation|destructive)\b`)
	approvalHint = regexp.MustCompile(`(?i)approv|✅|👍`)
)

// looksLikePlan tells a plan card from the bot's other messages: it runs
// to several lines, names a risk class and says how to approve. A one-line
// notice that mentions approval is not a plan.
func looksLikePlan(text string) bool {
	return strings.Count(text, "\n") >= 2 && riskBadge.MatchString(text) && approvalHint.MatchString(text)
}
