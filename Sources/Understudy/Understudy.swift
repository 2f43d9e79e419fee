// The Understudy client SDK (work starts here).
