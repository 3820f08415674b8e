package server

import (
	"fmt"
	"io"
	"log/slog"
)

// Formats of Config.LogFormat.
const (
	LogText = "text" // slog's key=value lines, the default
	LogJSON = "json" // one JSON object a line (slog.JSONHandler)
)

// NewLogger returns a logger writing to w in format (LogText, the
// default when empty, or LogJSON) at level.
func NewLogger(w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}
