package emulator

// maxResponseBytes is the service's response size limit (4 MB): a query or change-feed page
// holds as many results as its count allows and fit in it, and at least one (an item is at most
// maxBodyBytes, so one always fits).
const maxResponseBytes = 4 << 20

// pageEnvelope bounds the bytes of a page body besides its documents and the commas between
// them: {"_rid":...,"Documents":[...],"_count":n}.
const pageEnvelope = 1 << 10

// fitsPage reports whether a page of n documents of size bytes in all may take one more of
// next bytes within maxResponseBytes; an empty page takes any document.
func fitsPage(n, size, next int) bool {
	return n == 0 || pageEnvelope+size+n+next <= maxResponseBytes
}
