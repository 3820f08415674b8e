package acl

// HasCodeRule reports whether code has its own entry in the request-code
// table (codes without one are admin-only).
func HasCodeRule(code int16) bool {
	_, ok := codeRules[code]
	return ok
}
