package grpcserver

// Waiting returns the receives waiting for messages.
func (s *Server) Waiting() int64 { return s.b.POP().Waiting() }

// Sessions returns the client sessions.
func (s *Server) Sessions() int { return s.sessions.len() }

// Parked returns the waiting receives asleep until their next wake-up.
func (s *Server) Parked() int64 { return s.b.POP().Parked() }
