package emulator

// withoutLSN returns body (a stored document: a JSON object) without its top-level "_lsn"
// property. The service puts _lsn only on change-feed items; reads, writes and queries answer
// without it. Nested objects may hold their own "_lsn" keys, which stay. body is not modified.
func withoutLSN(body []byte) []byte {
	const key = `"_lsn"`
	depth, inString := 0, false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == '"':
			if depth == 1 && len(body)-i >= len(key) && string(body[i:i+len(key)]) == key && (body[i-1] == '{' || body[i-1] == ',') {
				// The value is a number: it ends at the next ',' or '}' at this depth.
				j := i + len(key)
				for j < len(body) && body[j] != ',' && body[j] != '}' {
					j++
				}
				start, end := i, j
				if j < len(body) && body[j] == ',' {
					end = j + 1 // drop the comma after it
				} else if body[i-1] == ',' {
					start = i - 1 // last property: drop the comma before it
				}
				out := make([]byte, 0, len(body)-(end-start))
				out = append(out, body[:start]...)
				return append(out, body[end:]...)
			}
			inString = true
		}
	}
	return body
}
