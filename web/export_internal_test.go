package web

// RouteExamples lists a concrete path for every registered route, so
// tests can walk them all.
func (s *Server) RouteExamples() []string {
	var out []string
	for _, r := range s.routeTable() {
		out = append(out, r.example)
	}
	return out
}
