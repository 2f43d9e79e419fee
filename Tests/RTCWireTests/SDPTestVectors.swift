// Generated from /work/shared/data/sdp (captured real SDP, CRLF in the originals).
// Embedded so the tests need no resources and no files outside the repository.

enum SDPTestVectors {
    /// `aiortc-1.16-answer-to-chromium-offer.sdp`, with LF line ends.
    static let aiortc116AnswerToChromiumOffer = #"""
        v=0
        o=- 4004945550 4004945550 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=msid-semantic:WMS *
        m=audio 36856 UDP/TLS/RTP/SAVPF 111 9 0 8
        c=IN IP4 127.0.0.1
        a=recvonly
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=mid:0
        a=msid:cbfb210b-6fb7-4aff-9ba9-ec3949ed1000 a803e1ee-3f5c-44b1-8234-ccae3ac5d48f
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc:3714076857 cname:ed11b46e-da37-4b06-aa52-3d6fff242734
        a=rtpmap:111 opus/48000/2
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=candidate:16572de626da4e5384a0ce2d0d93678a 1 udp 2130706431 127.0.0.1 36856 typ host
        a=end-of-candidates
        a=ice-ufrag:CbTA
        a=ice-pwd:MCPrio80r9Zuen5o2uT1We
        a=fingerprint:sha-256 A2:3B:20:B3:A0:3F:39:D9:6D:91:70:49:33:0F:54:A2:71:FE:53:6D:60:35:22:C0:E6:4F:F9:88:13:0A:8A:21
        a=fingerprint:sha-384 10:5F:1A:0D:A0:30:EA:1A:76:B7:98:6D:B2:7A:60:18:91:D4:84:70:58:40:3C:0F:DB:0A:E8:B1:EC:EB:2C:58:FE:96:A5:E1:85:FC:23:01:69:22:31:A3:CB:39:B4:D3
        a=fingerprint:sha-512 01:2C:BB:F1:ED:F7:F4:D1:D2:84:9B:25:A4:79:4B:D3:CB:B0:5A:41:47:D5:BB:4E:67:F3:3B:96:1A:05:26:80:92:8B:4A:7E:8A:25:D5:89:97:25:AB:0C:C0:E5:F0:27:E3:E7:B6:3C:4C:97:99:95:2B:A7:DE:92:78:23:9A:50
        a=setup:active
        m=video 36856 UDP/TLS/RTP/SAVPF 96 97 102 103 108 109
        c=IN IP4 127.0.0.1
        a=recvonly
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=mid:1
        a=msid:cbfb210b-6fb7-4aff-9ba9-ec3949ed1000 6f98eaa7-2bc8-4fa7-8250-5e46d85c18a2
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc-group:FID 2216902814 433154023
        a=ssrc:2216902814 cname:ed11b46e-da37-4b06-aa52-3d6fff242734
        a=ssrc:433154023 cname:ed11b46e-da37-4b06-aa52-3d6fff242734
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtcp-fb:96 goog-remb
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=rtcp-fb:102 goog-remb
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:108 H264/90000
        a=rtcp-fb:108 nack
        a=rtcp-fb:108 nack pli
        a=rtcp-fb:108 goog-remb
        a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:109 rtx/90000
        a=fmtp:109 apt=108
        a=candidate:16572de626da4e5384a0ce2d0d93678a 1 udp 2130706431 127.0.0.1 36856 typ host
        a=end-of-candidates
        a=ice-ufrag:CbTA
        a=ice-pwd:MCPrio80r9Zuen5o2uT1We
        a=fingerprint:sha-256 A2:3B:20:B3:A0:3F:39:D9:6D:91:70:49:33:0F:54:A2:71:FE:53:6D:60:35:22:C0:E6:4F:F9:88:13:0A:8A:21
        a=fingerprint:sha-384 10:5F:1A:0D:A0:30:EA:1A:76:B7:98:6D:B2:7A:60:18:91:D4:84:70:58:40:3C:0F:DB:0A:E8:B1:EC:EB:2C:58:FE:96:A5:E1:85:FC:23:01:69:22:31:A3:CB:39:B4:D3
        a=fingerprint:sha-512 01:2C:BB:F1:ED:F7:F4:D1:D2:84:9B:25:A4:79:4B:D3:CB:B0:5A:41:47:D5:BB:4E:67:F3:3B:96:1A:05:26:80:92:8B:4A:7E:8A:25:D5:89:97:25:AB:0C:C0:E5:F0:27:E3:E7:B6:3C:4C:97:99:95:2B:A7:DE:92:78:23:9A:50
        a=setup:active
        """# + "\n"

    /// `aiortc-1.16-offer-sendrecv.sdp`, with LF line ends.
    static let aiortc116OfferSendrecv = #"""
        v=0
        o=- 4004945550 4004945550 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=msid-semantic:WMS *
        m=audio 49934 UDP/TLS/RTP/SAVPF 96 9 0 8
        c=IN IP4 127.0.0.1
        a=sendrecv
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:2 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=mid:0
        a=msid:25d27edd-7ec1-44a0-b9ef-337530b427b9 5e150629-7833-4a67-9aaf-c019f8d031ca
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc:114451043 cname:cdc6e0d1-10af-4623-afc0-e0407b4e057c
        a=rtpmap:96 opus/48000/2
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=candidate:16572de626da4e5384a0ce2d0d93678a 1 udp 2130706431 127.0.0.1 49934 typ host
        a=end-of-candidates
        a=ice-ufrag:YWeF
        a=ice-pwd:IEv5AKjCRlVbhG4JqOYyIl
        a=fingerprint:sha-256 E4:9C:86:49:77:C6:98:47:18:75:13:CB:C0:9E:3A:F3:86:31:97:05:67:7A:E3:B0:7A:58:4E:9E:B5:AC:00:CA
        a=fingerprint:sha-384 A0:42:08:52:E3:41:CD:FC:CD:21:1A:3E:F6:59:B1:33:A9:5F:A4:52:1C:BF:8B:91:00:97:0D:88:48:8E:A8:8A:5B:37:2F:80:42:F2:63:F8:A2:07:13:9D:7D:82:92:98
        a=fingerprint:sha-512 02:25:42:27:11:E8:4C:6D:23:0E:F8:97:98:48:9F:CB:1C:52:C0:55:8C:A6:8C:84:28:BB:C1:35:17:D6:1E:EE:1F:05:CB:76:3E:15:5E:F0:B8:67:67:A5:43:8B:51:AF:E0:2B:E6:1B:A5:2C:67:06:FC:20:C5:07:A9:E2:3E:FB
        a=setup:actpass
        m=video 42777 UDP/TLS/RTP/SAVPF 97 98 99 100 101 102
        c=IN IP4 127.0.0.1
        a=sendrecv
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:3 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=mid:1
        a=msid:25d27edd-7ec1-44a0-b9ef-337530b427b9 b6ad7ca6-82d9-4d4c-84f4-f93ddd4da504
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc-group:FID 3382069390 152750956
        a=ssrc:3382069390 cname:cdc6e0d1-10af-4623-afc0-e0407b4e057c
        a=ssrc:152750956 cname:cdc6e0d1-10af-4623-afc0-e0407b4e057c
        a=rtpmap:97 VP8/90000
        a=rtcp-fb:97 nack
        a=rtcp-fb:97 nack pli
        a=rtcp-fb:97 goog-remb
        a=rtpmap:98 rtx/90000
        a=fmtp:98 apt=97
        a=rtpmap:99 H264/90000
        a=rtcp-fb:99 nack
        a=rtcp-fb:99 nack pli
        a=rtcp-fb:99 goog-remb
        a=fmtp:99 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:100 rtx/90000
        a=fmtp:100 apt=99
        a=rtpmap:101 H264/90000
        a=rtcp-fb:101 nack
        a=rtcp-fb:101 nack pli
        a=rtcp-fb:101 goog-remb
        a=fmtp:101 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:102 rtx/90000
        a=fmtp:102 apt=101
        a=candidate:16572de626da4e5384a0ce2d0d93678a 1 udp 2130706431 127.0.0.1 42777 typ host
        a=end-of-candidates
        a=ice-ufrag:YWeF
        a=ice-pwd:IEv5AKjCRlVbhG4JqOYyIl
        a=fingerprint:sha-256 E4:9C:86:49:77:C6:98:47:18:75:13:CB:C0:9E:3A:F3:86:31:97:05:67:7A:E3:B0:7A:58:4E:9E:B5:AC:00:CA
        a=fingerprint:sha-384 A0:42:08:52:E3:41:CD:FC:CD:21:1A:3E:F6:59:B1:33:A9:5F:A4:52:1C:BF:8B:91:00:97:0D:88:48:8E:A8:8A:5B:37:2F:80:42:F2:63:F8:A2:07:13:9D:7D:82:92:98
        a=fingerprint:sha-512 02:25:42:27:11:E8:4C:6D:23:0E:F8:97:98:48:9F:CB:1C:52:C0:55:8C:A6:8C:84:28:BB:C1:35:17:D6:1E:EE:1F:05:CB:76:3E:15:5E:F0:B8:67:67:A5:43:8B:51:AF:E0:2B:E6:1B:A5:2C:67:06:FC:20:C5:07:A9:E2:3E:FB
        a=setup:actpass
        """# + "\n"

    /// `chromium-156-answer-recvonly.sdp`, with LF line ends.
    static let chromium156AnswerRecvonly = #"""
        v=0
        o=- 1977966655379496217 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS
        m=audio 41833 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 127.0.0.1
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:3258020269 1 udp 2122260223 127.0.0.1 41833 typ host generation 0 network-id 1 network-cost 50
        a=ice-ufrag:UhGY
        a=ice-pwd:FSxDj0jv+N9LiO17OdTkZikO
        a=ice-options:trickle
        a=fingerprint:sha-256 CC:F4:9B:F1:25:6F:AC:22:A9:49:5F:92:E0:BE:A8:00:C8:76:B8:00:B2:08:EC:5E:C4:84:DF:A3:63:5C:8A:95
        a=setup:active
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=recvonly
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        m=video 9 UDP/TLS/RTP/SAVPF 96 97 102 103 104 107 108 109 114 115 116 117 39 40 45 46 98 99 100 101 118 119 120
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:UhGY
        a=ice-pwd:FSxDj0jv+N9LiO17OdTkZikO
        a=ice-options:trickle
        a=fingerprint:sha-256 CC:F4:9B:F1:25:6F:AC:22:A9:49:5F:92:E0:BE:A8:00:C8:76:B8:00:B2:08:EC:5E:C4:84:DF:A3:63:5C:8A:95
        a=setup:active
        a=mid:1
        a=extmap:14 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:13 urn:3gpp:video-orientation
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay
        a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type
        a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing
        a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id
        a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id
        a=recvonly
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 goog-remb
        a=rtcp-fb:102 transport-cc
        a=rtcp-fb:102 ccm fir
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:104 H264/90000
        a=rtcp-fb:104 goog-remb
        a=rtcp-fb:104 transport-cc
        a=rtcp-fb:104 ccm fir
        a=rtcp-fb:104 nack
        a=rtcp-fb:104 nack pli
        a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f
        a=rtpmap:107 rtx/90000
        a=fmtp:107 apt=104
        a=rtpmap:108 H264/90000
        a=rtcp-fb:108 goog-remb
        a=rtcp-fb:108 transport-cc
        a=rtcp-fb:108 ccm fir
        a=rtcp-fb:108 nack
        a=rtcp-fb:108 nack pli
        a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:109 rtx/90000
        a=fmtp:109 apt=108
        a=rtpmap:114 H264/90000
        a=rtcp-fb:114 goog-remb
        a=rtcp-fb:114 transport-cc
        a=rtcp-fb:114 ccm fir
        a=rtcp-fb:114 nack
        a=rtcp-fb:114 nack pli
        a=fmtp:114 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f
        a=rtpmap:115 rtx/90000
        a=fmtp:115 apt=114
        a=rtpmap:116 H264/90000
        a=rtcp-fb:116 goog-remb
        a=rtcp-fb:116 transport-cc
        a=rtcp-fb:116 ccm fir
        a=rtcp-fb:116 nack
        a=rtcp-fb:116 nack pli
        a=fmtp:116 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f
        a=rtpmap:117 rtx/90000
        a=fmtp:117 apt=116
        a=rtpmap:39 H264/90000
        a=rtcp-fb:39 goog-remb
        a=rtcp-fb:39 transport-cc
        a=rtcp-fb:39 ccm fir
        a=rtcp-fb:39 nack
        a=rtcp-fb:39 nack pli
        a=fmtp:39 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f
        a=rtpmap:40 rtx/90000
        a=fmtp:40 apt=39
        a=rtpmap:45 AV1/90000
        a=rtcp-fb:45 goog-remb
        a=rtcp-fb:45 transport-cc
        a=rtcp-fb:45 ccm fir
        a=rtcp-fb:45 nack
        a=rtcp-fb:45 nack pli
        a=fmtp:45 level-idx=5;profile=0;tier=0
        a=rtpmap:46 rtx/90000
        a=fmtp:46 apt=45
        a=rtpmap:98 VP9/90000
        a=rtcp-fb:98 goog-remb
        a=rtcp-fb:98 transport-cc
        a=rtcp-fb:98 ccm fir
        a=rtcp-fb:98 nack
        a=rtcp-fb:98 nack pli
        a=fmtp:98 profile-id=0
        a=rtpmap:99 rtx/90000
        a=fmtp:99 apt=98
        a=rtpmap:100 VP9/90000
        a=rtcp-fb:100 goog-remb
        a=rtcp-fb:100 transport-cc
        a=rtcp-fb:100 ccm fir
        a=rtcp-fb:100 nack
        a=rtcp-fb:100 nack pli
        a=fmtp:100 profile-id=2
        a=rtpmap:101 rtx/90000
        a=fmtp:101 apt=100
        a=rtpmap:118 red/90000
        a=rtpmap:119 rtx/90000
        a=fmtp:119 apt=118
        a=rtpmap:120 ulpfec/90000
        """# + "\n"

    /// `chromium-156-offer-recvonly.sdp`, with LF line ends.
    static let chromium156OfferRecvonly = #"""
        v=0
        o=- 400113759666107127 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS
        m=audio 35429 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 127.0.0.1
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:3784836577 1 udp 2122260223 127.0.0.1 35429 typ host generation 0 network-id 1 network-cost 50
        a=candidate:2673338233 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0 network-id 1 network-cost 50
        a=ice-ufrag:CZA2
        a=ice-pwd:z+sfky97ZS85r02xQXES/6w9
        a=ice-options:trickle
        a=fingerprint:sha-256 F6:42:83:4C:88:1A:87:4A:0D:D9:20:9D:42:1E:57:EF:F8:D0:33:BD:2B:CD:5D:FA:B0:17:FF:51:9B:25:DA:F3
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=recvonly
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        m=video 46664 UDP/TLS/RTP/SAVPF 96 97 98 99 100 101 35 36 37 38 102 103 104 107 108 109 114 115 116 117 39 40 41 42 43 44 45 46 47 48 118 119 120 49
        c=IN IP4 127.0.0.1
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:3784836577 1 udp 2122260223 127.0.0.1 46664 typ host generation 0 network-id 1 network-cost 50
        a=candidate:2673338233 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0 network-id 1 network-cost 50
        a=ice-ufrag:CZA2
        a=ice-pwd:z+sfky97ZS85r02xQXES/6w9
        a=ice-options:trickle
        a=fingerprint:sha-256 F6:42:83:4C:88:1A:87:4A:0D:D9:20:9D:42:1E:57:EF:F8:D0:33:BD:2B:CD:5D:FA:B0:17:FF:51:9B:25:DA:F3
        a=setup:actpass
        a=mid:1
        a=extmap:14 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:13 urn:3gpp:video-orientation
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay
        a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type
        a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing
        a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id
        a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id
        a=recvonly
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:98 VP9/90000
        a=rtcp-fb:98 goog-remb
        a=rtcp-fb:98 transport-cc
        a=rtcp-fb:98 ccm fir
        a=rtcp-fb:98 nack
        a=rtcp-fb:98 nack pli
        a=fmtp:98 profile-id=0
        a=rtpmap:99 rtx/90000
        a=fmtp:99 apt=98
        a=rtpmap:100 VP9/90000
        a=rtcp-fb:100 goog-remb
        a=rtcp-fb:100 transport-cc
        a=rtcp-fb:100 ccm fir
        a=rtcp-fb:100 nack
        a=rtcp-fb:100 nack pli
        a=fmtp:100 profile-id=2
        a=rtpmap:101 rtx/90000
        a=fmtp:101 apt=100
        a=rtpmap:35 VP9/90000
        a=rtcp-fb:35 goog-remb
        a=rtcp-fb:35 transport-cc
        a=rtcp-fb:35 ccm fir
        a=rtcp-fb:35 nack
        a=rtcp-fb:35 nack pli
        a=fmtp:35 profile-id=1
        a=rtpmap:36 rtx/90000
        a=fmtp:36 apt=35
        a=rtpmap:37 VP9/90000
        a=rtcp-fb:37 goog-remb
        a=rtcp-fb:37 transport-cc
        a=rtcp-fb:37 ccm fir
        a=rtcp-fb:37 nack
        a=rtcp-fb:37 nack pli
        a=fmtp:37 profile-id=3
        a=rtpmap:38 rtx/90000
        a=fmtp:38 apt=37
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 goog-remb
        a=rtcp-fb:102 transport-cc
        a=rtcp-fb:102 ccm fir
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:104 H264/90000
        a=rtcp-fb:104 goog-remb
        a=rtcp-fb:104 transport-cc
        a=rtcp-fb:104 ccm fir
        a=rtcp-fb:104 nack
        a=rtcp-fb:104 nack pli
        a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f
        a=rtpmap:107 rtx/90000
        a=fmtp:107 apt=104
        a=rtpmap:108 H264/90000
        a=rtcp-fb:108 goog-remb
        a=rtcp-fb:108 transport-cc
        a=rtcp-fb:108 ccm fir
        a=rtcp-fb:108 nack
        a=rtcp-fb:108 nack pli
        a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:109 rtx/90000
        a=fmtp:109 apt=108
        a=rtpmap:114 H264/90000
        a=rtcp-fb:114 goog-remb
        a=rtcp-fb:114 transport-cc
        a=rtcp-fb:114 ccm fir
        a=rtcp-fb:114 nack
        a=rtcp-fb:114 nack pli
        a=fmtp:114 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f
        a=rtpmap:115 rtx/90000
        a=fmtp:115 apt=114
        a=rtpmap:116 H264/90000
        a=rtcp-fb:116 goog-remb
        a=rtcp-fb:116 transport-cc
        a=rtcp-fb:116 ccm fir
        a=rtcp-fb:116 nack
        a=rtcp-fb:116 nack pli
        a=fmtp:116 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f
        a=rtpmap:117 rtx/90000
        a=fmtp:117 apt=116
        a=rtpmap:39 H264/90000
        a=rtcp-fb:39 goog-remb
        a=rtcp-fb:39 transport-cc
        a=rtcp-fb:39 ccm fir
        a=rtcp-fb:39 nack
        a=rtcp-fb:39 nack pli
        a=fmtp:39 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f
        a=rtpmap:40 rtx/90000
        a=fmtp:40 apt=39
        a=rtpmap:41 H264/90000
        a=rtcp-fb:41 goog-remb
        a=rtcp-fb:41 transport-cc
        a=rtcp-fb:41 ccm fir
        a=rtcp-fb:41 nack
        a=rtcp-fb:41 nack pli
        a=fmtp:41 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=f4001f
        a=rtpmap:42 rtx/90000
        a=fmtp:42 apt=41
        a=rtpmap:43 H264/90000
        a=rtcp-fb:43 goog-remb
        a=rtcp-fb:43 transport-cc
        a=rtcp-fb:43 ccm fir
        a=rtcp-fb:43 nack
        a=rtcp-fb:43 nack pli
        a=fmtp:43 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=f4001f
        a=rtpmap:44 rtx/90000
        a=fmtp:44 apt=43
        a=rtpmap:45 AV1/90000
        a=rtcp-fb:45 goog-remb
        a=rtcp-fb:45 transport-cc
        a=rtcp-fb:45 ccm fir
        a=rtcp-fb:45 nack
        a=rtcp-fb:45 nack pli
        a=fmtp:45 level-idx=5;profile=0;tier=0
        a=rtpmap:46 rtx/90000
        a=fmtp:46 apt=45
        a=rtpmap:47 AV1/90000
        a=rtcp-fb:47 goog-remb
        a=rtcp-fb:47 transport-cc
        a=rtcp-fb:47 ccm fir
        a=rtcp-fb:47 nack
        a=rtcp-fb:47 nack pli
        a=fmtp:47 level-idx=5;profile=1;tier=0
        a=rtpmap:48 rtx/90000
        a=fmtp:48 apt=47
        a=rtpmap:118 red/90000
        a=rtpmap:119 rtx/90000
        a=fmtp:119 apt=118
        a=rtpmap:120 ulpfec/90000
        a=rtpmap:49 flexfec-03/90000
        a=rtcp-fb:49 goog-remb
        a=rtcp-fb:49 transport-cc
        a=fmtp:49 repair-window=10000000
        """# + "\n"

    /// `chromium-156-offer-sendrecv.sdp`, with LF line ends.
    static let chromium156OfferSendrecv = #"""
        v=0
        o=- 1796127122789785401 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS 30124d5f-6377-4e3b-b69a-aea2f630bb9a
        m=audio 36091 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 127.0.0.1
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:2027105895 1 udp 2122260223 127.0.0.1 36091 typ host generation 0 network-id 1 network-cost 50
        a=candidate:1468702314 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0 network-id 1 network-cost 50
        a=ice-ufrag:TCmf
        a=ice-pwd:KOXh4agDYkH+6Mglwol4gxi4
        a=ice-options:trickle
        a=fingerprint:sha-256 18:D6:08:5A:A9:65:42:5D:2F:1C:29:BC:1F:76:CA:FB:3C:15:00:58:4B:BD:94:1B:DF:DE:9A:26:16:ED:A7:A4
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=sendrecv
        a=msid:30124d5f-6377-4e3b-b69a-aea2f630bb9a b986eac5-3381-4dcf-8f4f-479a90858d0b
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        a=ssrc:3590282660 cname:108uti9nyS1pYrit
        a=ssrc:3590282660 msid:30124d5f-6377-4e3b-b69a-aea2f630bb9a b986eac5-3381-4dcf-8f4f-479a90858d0b
        m=video 34914 UDP/TLS/RTP/SAVPF 96 97 102 103 104 107 108 109 114 115 116 117 39 40 45 46 98 99 100 101 118 119 120
        c=IN IP4 127.0.0.1
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:2027105895 1 udp 2122260223 127.0.0.1 34914 typ host generation 0 network-id 1 network-cost 50
        a=candidate:1468702314 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0 network-id 1 network-cost 50
        a=ice-ufrag:TCmf
        a=ice-pwd:KOXh4agDYkH+6Mglwol4gxi4
        a=ice-options:trickle
        a=fingerprint:sha-256 18:D6:08:5A:A9:65:42:5D:2F:1C:29:BC:1F:76:CA:FB:3C:15:00:58:4B:BD:94:1B:DF:DE:9A:26:16:ED:A7:A4
        a=setup:actpass
        a=mid:1
        a=extmap:14 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:13 urn:3gpp:video-orientation
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay
        a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type
        a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing
        a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id
        a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id
        a=sendrecv
        a=msid:30124d5f-6377-4e3b-b69a-aea2f630bb9a d14f44ca-67c9-4eca-94f6-a197e5e9d126
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 goog-remb
        a=rtcp-fb:102 transport-cc
        a=rtcp-fb:102 ccm fir
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:104 H264/90000
        a=rtcp-fb:104 goog-remb
        a=rtcp-fb:104 transport-cc
        a=rtcp-fb:104 ccm fir
        a=rtcp-fb:104 nack
        a=rtcp-fb:104 nack pli
        a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f
        a=rtpmap:107 rtx/90000
        a=fmtp:107 apt=104
        a=rtpmap:108 H264/90000
        a=rtcp-fb:108 goog-remb
        a=rtcp-fb:108 transport-cc
        a=rtcp-fb:108 ccm fir
        a=rtcp-fb:108 nack
        a=rtcp-fb:108 nack pli
        a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:109 rtx/90000
        a=fmtp:109 apt=108
        a=rtpmap:114 H264/90000
        a=rtcp-fb:114 goog-remb
        a=rtcp-fb:114 transport-cc
        a=rtcp-fb:114 ccm fir
        a=rtcp-fb:114 nack
        a=rtcp-fb:114 nack pli
        a=fmtp:114 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f
        a=rtpmap:115 rtx/90000
        a=fmtp:115 apt=114
        a=rtpmap:116 H264/90000
        a=rtcp-fb:116 goog-remb
        a=rtcp-fb:116 transport-cc
        a=rtcp-fb:116 ccm fir
        a=rtcp-fb:116 nack
        a=rtcp-fb:116 nack pli
        a=fmtp:116 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f
        a=rtpmap:117 rtx/90000
        a=fmtp:117 apt=116
        a=rtpmap:39 H264/90000
        a=rtcp-fb:39 goog-remb
        a=rtcp-fb:39 transport-cc
        a=rtcp-fb:39 ccm fir
        a=rtcp-fb:39 nack
        a=rtcp-fb:39 nack pli
        a=fmtp:39 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f
        a=rtpmap:40 rtx/90000
        a=fmtp:40 apt=39
        a=rtpmap:45 AV1/90000
        a=rtcp-fb:45 goog-remb
        a=rtcp-fb:45 transport-cc
        a=rtcp-fb:45 ccm fir
        a=rtcp-fb:45 nack
        a=rtcp-fb:45 nack pli
        a=fmtp:45 level-idx=5;profile=0;tier=0
        a=rtpmap:46 rtx/90000
        a=fmtp:46 apt=45
        a=rtpmap:98 VP9/90000
        a=rtcp-fb:98 goog-remb
        a=rtcp-fb:98 transport-cc
        a=rtcp-fb:98 ccm fir
        a=rtcp-fb:98 nack
        a=rtcp-fb:98 nack pli
        a=fmtp:98 profile-id=0
        a=rtpmap:99 rtx/90000
        a=fmtp:99 apt=98
        a=rtpmap:100 VP9/90000
        a=rtcp-fb:100 goog-remb
        a=rtcp-fb:100 transport-cc
        a=rtcp-fb:100 ccm fir
        a=rtcp-fb:100 nack
        a=rtcp-fb:100 nack pli
        a=fmtp:100 profile-id=2
        a=rtpmap:101 rtx/90000
        a=fmtp:101 apt=100
        a=rtpmap:118 red/90000
        a=rtpmap:119 rtx/90000
        a=fmtp:119 apt=118
        a=rtpmap:120 ulpfec/90000
        a=ssrc-group:FID 1344066152 650572485
        a=ssrc:1344066152 cname:108uti9nyS1pYrit
        a=ssrc:1344066152 msid:30124d5f-6377-4e3b-b69a-aea2f630bb9a d14f44ca-67c9-4eca-94f6-a197e5e9d126
        a=ssrc:650572485 cname:108uti9nyS1pYrit
        a=ssrc:650572485 msid:30124d5f-6377-4e3b-b69a-aea2f630bb9a d14f44ca-67c9-4eca-94f6-a197e5e9d126
        """# + "\n"

    /// `chromium-156-offer-simulcast-sendonly.sdp`, with LF line ends.
    static let chromium156OfferSimulcastSendonly = #"""
        v=0
        o=- 4774237370221024595 2 IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS
        m=audio 40722 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 127.0.0.1
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:697336208 1 udp 2122260223 127.0.0.1 40722 typ host generation 0 network-id 1 network-cost 50
        a=candidate:1465869064 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0 network-id 1 network-cost 50
        a=ice-ufrag:+KTA
        a=ice-pwd:AlIx2355U5YTHJ+7iw6amoyZ
        a=ice-options:trickle
        a=fingerprint:sha-256 FC:D8:30:69:30:D2:D7:2B:1A:EA:DC:58:0F:34:59:4F:2B:E3:3E:A7:DC:96:BD:91:C7:97:CB:80:2C:F3:48:DA
        a=setup:actpass
        a=mid:0
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=sendonly
        a=msid:- b986eac5-3381-4dcf-8f4f-479a90858d0b
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        a=ssrc:438245661 cname:Da25xRKaMD2b8yT6
        a=ssrc:438245661 msid:- b986eac5-3381-4dcf-8f4f-479a90858d0b
        m=video 56250 UDP/TLS/RTP/SAVPF 96 97 102 103 104 107 108 109 114 115 116 117 39 40 45 46 98 99 100 101 118 119 120
        c=IN IP4 127.0.0.1
        a=rtcp:9 IN IP4 0.0.0.0
        a=candidate:697336208 1 udp 2122260223 127.0.0.1 56250 typ host generation 0 network-id 1 network-cost 50
        a=candidate:1465869064 1 tcp 1518280447 127.0.0.1 9 typ host tcptype active generation 0 network-id 1 network-cost 50
        a=ice-ufrag:+KTA
        a=ice-pwd:AlIx2355U5YTHJ+7iw6amoyZ
        a=ice-options:trickle
        a=fingerprint:sha-256 FC:D8:30:69:30:D2:D7:2B:1A:EA:DC:58:0F:34:59:4F:2B:E3:3E:A7:DC:96:BD:91:C7:97:CB:80:2C:F3:48:DA
        a=setup:actpass
        a=mid:1
        a=extmap:14 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:13 urn:3gpp:video-orientation
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay
        a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type
        a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing
        a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id
        a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id
        a=extmap:12 https://aomediacodec.github.io/av1-rtp-spec/#dependency-descriptor-rtp-header-extension
        a=extmap:9 http://www.webrtc.org/experiments/rtp-hdrext/video-layers-allocation00
        a=sendonly
        a=msid:- d14f44ca-67c9-4eca-94f6-a197e5e9d126
        a=rtcp-mux
        a=rtcp-rsize
        a=rtcp-xr:rcvr-rtt=all
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:102 H264/90000
        a=rtcp-fb:102 goog-remb
        a=rtcp-fb:102 transport-cc
        a=rtcp-fb:102 ccm fir
        a=rtcp-fb:102 nack
        a=rtcp-fb:102 nack pli
        a=fmtp:102 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f
        a=rtpmap:103 rtx/90000
        a=fmtp:103 apt=102
        a=rtpmap:104 H264/90000
        a=rtcp-fb:104 goog-remb
        a=rtcp-fb:104 transport-cc
        a=rtcp-fb:104 ccm fir
        a=rtcp-fb:104 nack
        a=rtcp-fb:104 nack pli
        a=fmtp:104 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f
        a=rtpmap:107 rtx/90000
        a=fmtp:107 apt=104
        a=rtpmap:108 H264/90000
        a=rtcp-fb:108 goog-remb
        a=rtcp-fb:108 transport-cc
        a=rtcp-fb:108 ccm fir
        a=rtcp-fb:108 nack
        a=rtcp-fb:108 nack pli
        a=fmtp:108 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f
        a=rtpmap:109 rtx/90000
        a=fmtp:109 apt=108
        a=rtpmap:114 H264/90000
        a=rtcp-fb:114 goog-remb
        a=rtcp-fb:114 transport-cc
        a=rtcp-fb:114 ccm fir
        a=rtcp-fb:114 nack
        a=rtcp-fb:114 nack pli
        a=fmtp:114 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f
        a=rtpmap:115 rtx/90000
        a=fmtp:115 apt=114
        a=rtpmap:116 H264/90000
        a=rtcp-fb:116 goog-remb
        a=rtcp-fb:116 transport-cc
        a=rtcp-fb:116 ccm fir
        a=rtcp-fb:116 nack
        a=rtcp-fb:116 nack pli
        a=fmtp:116 level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f
        a=rtpmap:117 rtx/90000
        a=fmtp:117 apt=116
        a=rtpmap:39 H264/90000
        a=rtcp-fb:39 goog-remb
        a=rtcp-fb:39 transport-cc
        a=rtcp-fb:39 ccm fir
        a=rtcp-fb:39 nack
        a=rtcp-fb:39 nack pli
        a=fmtp:39 level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f
        a=rtpmap:40 rtx/90000
        a=fmtp:40 apt=39
        a=rtpmap:45 AV1/90000
        a=rtcp-fb:45 goog-remb
        a=rtcp-fb:45 transport-cc
        a=rtcp-fb:45 ccm fir
        a=rtcp-fb:45 nack
        a=rtcp-fb:45 nack pli
        a=fmtp:45 level-idx=5;profile=0;tier=0
        a=rtpmap:46 rtx/90000
        a=fmtp:46 apt=45
        a=rtpmap:98 VP9/90000
        a=rtcp-fb:98 goog-remb
        a=rtcp-fb:98 transport-cc
        a=rtcp-fb:98 ccm fir
        a=rtcp-fb:98 nack
        a=rtcp-fb:98 nack pli
        a=fmtp:98 profile-id=0
        a=rtpmap:99 rtx/90000
        a=fmtp:99 apt=98
        a=rtpmap:100 VP9/90000
        a=rtcp-fb:100 goog-remb
        a=rtcp-fb:100 transport-cc
        a=rtcp-fb:100 ccm fir
        a=rtcp-fb:100 nack
        a=rtcp-fb:100 nack pli
        a=fmtp:100 profile-id=2
        a=rtpmap:101 rtx/90000
        a=fmtp:101 apt=100
        a=rtpmap:118 red/90000
        a=rtpmap:119 rtx/90000
        a=fmtp:119 apt=118
        a=rtpmap:120 ulpfec/90000
        a=rid:q send
        a=rid:h send
        a=rid:f send
        a=simulcast:send q;h;f
        """# + "\n"

    /// `janus-1.1.2-videoroom-publisher-answer.sdp`, with LF line ends.
    static let janus112VideoroomPublisherAnswer = #"""
        v=0
        o=- 4004944341 4004944341 IN IP4 127.0.0.1
        s=VideoRoom 1234
        t=0 0
        a=group:BUNDLE 0 1
        a=ice-options:trickle
        a=fingerprint:sha-256 8E:2F:7A:8C:96:64:52:9D:51:28:BB:B0:7D:8F:4E:FF:74:C5:C6:C4:8C:48:38:7F:E6:CF:BF:01:6D:5F:0A:07
        a=extmap-allow-mixed
        a=msid-semantic: WMS *
        m=audio 9 UDP/TLS/RTP/SAVPF 96
        c=IN IP4 127.0.0.1
        a=recvonly
        a=mid:0
        a=rtcp-mux
        a=ice-ufrag:TJyK
        a=ice-pwd:KEv43+zU5ERy+x22t0oT1X
        a=ice-options:trickle
        a=setup:active
        a=rtpmap:96 opus/48000/2
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:2 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=msid:janus janus0
        a=ssrc:1582381711 cname:janus
        a=candidate:1 1 udp 2015363327 127.0.0.2 20177 typ host
        a=end-of-candidates
        m=video 9 UDP/TLS/RTP/SAVPF 97 98
        c=IN IP4 127.0.0.1
        a=recvonly
        a=mid:1
        a=rtcp-mux
        a=ice-ufrag:TJyK
        a=ice-pwd:KEv43+zU5ERy+x22t0oT1X
        a=ice-options:trickle
        a=setup:active
        a=rtpmap:97 VP8/90000
        a=rtcp-fb:97 ccm fir
        a=rtcp-fb:97 nack
        a=rtcp-fb:97 nack pli
        a=rtcp-fb:97 goog-remb
        a=rtcp-fb:97 transport-cc
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=rtpmap:98 rtx/90000
        a=fmtp:98 apt=97
        a=msid:janus janus1
        a=ssrc:1128790227 cname:janus
        a=candidate:1 1 udp 2015363327 127.0.0.2 20177 typ host
        a=end-of-candidates
        """# + "\n"

    /// `janus-1.1.2-videoroom-subscriber-offer.sdp`, with LF line ends.
    static let janus112VideoroomSubscriberOffer = #"""
        v=0
        o=- 1795955542855516 1 IN IP4 127.0.0.1
        s=VideoRoom 1234
        t=0 0
        a=group:BUNDLE 0 1
        a=ice-options:trickle
        a=fingerprint:sha-256 8E:2F:7A:8C:96:64:52:9D:51:28:BB:B0:7D:8F:4E:FF:74:C5:C6:C4:8C:48:38:7F:E6:CF:BF:01:6D:5F:0A:07
        a=extmap-allow-mixed
        a=msid-semantic: WMS *
        m=audio 9 UDP/TLS/RTP/SAVPF 111
        c=IN IP4 127.0.0.1
        a=sendonly
        a=mid:0
        a=rtcp-mux
        a=ice-ufrag:KfDh
        a=ice-pwd:kO72PRwpZaIP0I0h57NBhw
        a=ice-options:trickle
        a=setup:actpass
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=msid:janus janus0
        a=ssrc:1202756195 cname:janus
        a=candidate:1 1 udp 2015363327 127.0.0.2 20094 typ host
        a=end-of-candidates
        m=video 9 UDP/TLS/RTP/SAVPF 96 97
        c=IN IP4 127.0.0.1
        a=sendonly
        a=mid:1
        a=rtcp-mux
        a=ice-ufrag:KfDh
        a=ice-pwd:kO72PRwpZaIP0I0h57NBhw
        a=ice-options:trickle
        a=setup:actpass
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=ssrc-group:FID 246457405 1038605764
        a=msid:janus janus1
        a=ssrc:246457405 cname:janus
        a=ssrc:1038605764 cname:janus
        a=candidate:1 1 udp 2015363327 127.0.0.2 20094 typ host
        a=end-of-candidates
        """# + "\n"

    /// (file name, LF text) for every vector.
    static let all: [(name: String, text: String)] = [
        ("aiortc-1.16-answer-to-chromium-offer.sdp", aiortc116AnswerToChromiumOffer),
        ("aiortc-1.16-offer-sendrecv.sdp", aiortc116OfferSendrecv),
        ("chromium-156-answer-recvonly.sdp", chromium156AnswerRecvonly),
        ("chromium-156-offer-recvonly.sdp", chromium156OfferRecvonly),
        ("chromium-156-offer-sendrecv.sdp", chromium156OfferSendrecv),
        ("chromium-156-offer-simulcast-sendonly.sdp", chromium156OfferSimulcastSendonly),
        ("janus-1.1.2-videoroom-publisher-answer.sdp", janus112VideoroomPublisherAnswer),
        ("janus-1.1.2-videoroom-subscriber-offer.sdp", janus112VideoroomSubscriberOffer),
    ]
}
