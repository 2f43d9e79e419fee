// `understudy load`: being built (issue 6); the load helper replaces this file.
func runLoad(_ args: [String]) async { fail("load: not available in this build", code: 2) }
