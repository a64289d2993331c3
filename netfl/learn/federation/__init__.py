"""Federation: the learner's round protocol, the strategies of the papers, the server's step, compression and
the edge tier."""
