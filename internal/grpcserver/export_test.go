package grpcserver

// Waiting returns the receives waiting for messages.
func (s *Server) Waiting() int64 { return s.pop.waiting.Load() }
