package flightsvc

// ClientStreams returns the DoPut streams the client called name (as
// errors name it: "token low", "peer 127.0.0.1") has open.
func (s *Service) ClientStreams(name string) int { return s.clients.streams(name) }
