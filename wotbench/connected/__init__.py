"""Connected devices (issue 30, docs/CONNECTED.md): a run of
``protocol: websocket | chunked | chunked-post`` device groups held by wot-fleet engines against
an ``edge_server``, with wot-rpcapp applications sending RPCs through it. ``layout`` sizes the engines and the server's workers by
this host's descriptor limit, ``edge`` renders, checks, starts and stops the server,
``verdict`` reads the components' files into one summary and judges the testbed's part,
``run`` is the timeline."""
