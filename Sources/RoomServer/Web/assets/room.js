// The Understudy room page: joins a room over the signalling protocol v1 (docs/protocol.md),
// publishes camera/mic through the SFU, shows the stage and the audience, stage invites both ways,
// chat, moderation and a stats overlay. Plain JavaScript, no build step, nothing from the network
// but this server.
'use strict';

(() => {
  const SEND_AND_RECV = 'SEND_AND_RECV';
  const RECV_ONLY = 'RECV_ONLY';
  const MODES = new Set([SEND_AND_RECV, RECV_ONLY, 'SIGNALLING_ONLY']);
  const INVITE_PREFIX = 'REQUEST_TO_JOIN_AS_HOST_';
  const CHAT_TOPIC = 'CHAT';

  const params = new URLSearchParams(location.search);
  const flag = (name, fallback) => {
    const value = params.get(name);
    if (value === null) return fallback;
    return ['1', 'true', 'yes', 'on'].includes(value.toLowerCase());
  };
  const $ = (id) => document.getElementById(id);

  const state = {
    ws: null,
    nextRequestId: 1,
    pending: new Map(),
    joined: false,
    left: null,
    roomId: '',
    me: '',
    myName: '',
    permissions: [],
    participants: new Map(), // id -> {id, name, mode, isAgent, micEnabled, camEnabled}
    pins: new Map(), // id -> {cam, share}
    consumers: new Map(), // consumerId -> {consumerId, producerId, participantId, kind, mid}
    midTracks: new Map(), // subscribe-connection mid -> MediaStreamTrack
    pubPc: null,
    subPc: null,
    pubChain: Promise.resolve(),
    subChain: Promise.resolve(),
    local: {}, // kind -> {track, transceiver, producerId}
    wantMic: true,
    wantCam: true,
    chatIds: new Set(),
    presenterId: null,
    speakerId: null,
    iceServers: [], // TURN servers from the join response (docs/protocol.md, iceServers)
    tileStats: new Map(), // participantId -> overlay text
    statsSamples: new Map(), // key -> {bytes, packets, lost, time}
    events: [], // what happened, for tests and debugging
    autoAcceptInvites: flag('autoAcceptInvites', false),
    showStats: flag('stats', true),
    // The camera in three simulcast layers (as the SDK's multiStream), or one (?simulcast=0, or the
    // join form's checkbox), in Chromium and Firefox alike. Read when the camera is published.
    simulcast: flag('simulcast', true),
  };

  // The camera's simulcast layers, lowest first (docs/browser.md): a quarter, half and full
  // resolution, each capped so that the three together stay near what one full layer would take.
  const SIMULCAST_ENCODINGS = [
    { rid: 'q', scaleResolutionDownBy: 4, maxBitrate: 150_000 },
    { rid: 'h', scaleResolutionDownBy: 2, maxBitrate: 500_000 },
    { rid: 'f', scaleResolutionDownBy: 1, maxBitrate: 1_500_000 },
  ];

  // The camera size asked for (?camera=WxH; default 640x480).
  const CAMERA = (() => {
    const match = /^(\d{2,4})x(\d{2,4})$/.exec(params.get('camera') || '');
    return match ? { width: Number(match[1]), height: Number(match[2]) } : { width: 640, height: 480 };
  })();

  // libwebrtc sends at most three layers from 960x540 up and two from 480x270 up, dropping the top
  // ones past that: ask for the layers it will send, so that the full-size layer is always one.
  function simulcastEncodings(track) {
    const settings = track.getSettings ? track.getSettings() : {};
    const pixels = (settings.width || CAMERA.width) * (settings.height || CAMERA.height);
    const count = pixels >= 960 * 540 ? 3 : pixels >= 480 * 270 ? 2 : 1;
    if (count < 2) return null;
    return SIMULCAST_ENCODINGS.slice(3 - count).map((e) => ({ ...e }));
  }

  function note(event, detail) {
    state.events.push({ event, detail, time: Date.now() });
    if (state.events.length > 500) state.events.shift();
  }

  function toast(text) {
    const element = document.createElement('div');
    element.className = 'toast';
    element.textContent = text;
    $('toasts').appendChild(element);
    setTimeout(() => element.remove(), 6000);
    note('toast', text);
  }

  function setStatus(text) {
    $('status').textContent = text;
  }

  // ---- Signalling -------------------------------------------------------------------------

  class RoomRequestError extends Error {
    constructor(method, error) {
      super(`${method}: ${error.code} ${error.name}: ${error.message}`);
      this.code = error.code;
      this.errorName = error.name;
    }
  }

  function connect(token) {
    return new Promise((resolve, reject) => {
      const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
      const ws = new WebSocket(`${scheme}//${location.host}/v1/rtc?token=${encodeURIComponent(token)}`);
      let opened = false;
      ws.onopen = () => {
        opened = true;
        resolve(ws);
      };
      ws.onerror = () => {
        if (!opened) reject(new Error('cannot reach the room server'));
      };
      ws.onmessage = (event) => {
        let message;
        try {
          message = JSON.parse(event.data);
        } catch {
          return;
        }
        received(message);
      };
      ws.onclose = (event) => socketClosed(event);
    });
  }

  function request(method, data = {}) {
    return new Promise((resolve, reject) => {
      if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
        reject(new Error(`${method}: not connected`));
        return;
      }
      const id = state.nextRequestId++;
      state.pending.set(id, { resolve, reject, method });
      state.ws.send(JSON.stringify({ id, method, data }));
    });
  }

  function received(message) {
    if ('id' in message && 'ok' in message) {
      const pending = state.pending.get(message.id);
      if (!pending) return;
      state.pending.delete(message.id);
      if (message.ok) pending.resolve(message.data || {});
      else pending.reject(new RoomRequestError(pending.method, message.error || {}));
      return;
    }
    const handler = notifications[message.method];
    if (handler) {
      try {
        handler(message.data || {});
      } catch (error) {
        console.error(`handling ${message.method}`, error);
      }
    }
  }

  function socketClosed(event) {
    for (const pending of state.pending.values()) pending.reject(new Error(`${pending.method}: connection closed`));
    state.pending.clear();
    if (state.joined && !state.left) finish(`connection closed (${event.code})`);
  }

  // ---- Participants and lists ---------------------------------------------------------------

  function remember(p) {
    const previous = state.participants.get(p.participantId) || {};
    state.participants.set(p.participantId, {
      ...previous,
      id: p.participantId,
      name: p.name || p.participantId,
      mode: p.mode,
      isAgent: !!p.isAgent,
      micEnabled: !!p.micEnabled,
      camEnabled: !!p.camEnabled,
    });
  }

  // docs/spec/change-mode.md: rebuild both lists from every participant (the local one included) by mode.
  function participantsWithMode(mode) {
    return [...state.participants.values()].filter((p) => p.mode === mode);
  }

  function rebuildLists() {
    const stage = participantsWithMode(SEND_AND_RECV);
    const audience = participantsWithMode(RECV_ONLY);
    const pinned = (p) => (isPinned(p.id) ? 0 : 1);
    stage.sort((a, b) => pinned(a) - pinned(b) || (a.id === state.me ? -1 : b.id === state.me ? 1 : 0));
    renderStage(stage);
    renderAudience(audience);
    renderControls();
  }

  function isPinned(id) {
    const pin = state.pins.get(id);
    return !!pin && (pin.cam || pin.share);
  }

  function myMode() {
    return state.participants.get(state.me)?.mode;
  }

  function isModerator() {
    return state.permissions.includes('allow_mod');
  }

  function button(text, action, id, extraClass) {
    const element = document.createElement('button');
    element.type = 'button';
    element.className = `small ${extraClass || ''}`.trim();
    element.textContent = text;
    element.dataset.action = action;
    element.dataset.participantId = id;
    return element;
  }

  function badge(text, className) {
    const element = document.createElement('span');
    element.className = `badge ${className}`;
    element.textContent = text;
    return element;
  }

  const tiles = new Map(); // participantId -> {root, video, audio: Map, label, actions, stats, placeholder}

  function renderStage(stage) {
    const list = $('stage-list');
    const wanted = new Set(stage.map((p) => p.id));
    for (const [id, tile] of tiles) {
      if (!wanted.has(id)) {
        tile.root.remove();
        tiles.delete(id);
      }
    }
    for (const p of stage) {
      let tile = tiles.get(p.id);
      if (!tile) tile = makeTile(p.id);
      updateTile(tile, p);
      list.appendChild(tile.root); // appending an existing node moves it: keeps the sorted order
    }
    $('stage-count').textContent = String(stage.length);
  }

  function makeTile(id) {
    const root = document.createElement('div');
    root.className = 'tile';
    root.dataset.participantId = id;
    const video = document.createElement('video');
    video.autoplay = true;
    video.playsInline = true;
    video.muted = true; // audio plays through separate <audio> elements
    const placeholder = document.createElement('div');
    placeholder.className = 'placeholder';
    const label = document.createElement('div');
    label.className = 'label';
    const actions = document.createElement('div');
    actions.className = 'actions';
    const stats = document.createElement('div');
    stats.className = 'stats';
    const media = document.createElement('div');
    media.className = 'media';
    media.append(video, placeholder, stats);
    const footer = document.createElement('div');
    footer.className = 'footer';
    footer.append(label, actions);
    root.append(media, footer);
    const tile = { root, video, placeholder, label, actions, stats, audio: new Map(), trackId: null };
    tiles.set(id, tile);
    return tile;
  }

  function updateTile(tile, p) {
    const local = p.id === state.me;
    tile.root.classList.toggle('pinned', isPinned(p.id));
    tile.root.classList.toggle('speaking', state.speakerId === p.id);
    tile.root.dataset.pinned = isPinned(p.id) ? 'true' : 'false';
    tile.root.dataset.mic = p.micEnabled ? 'on' : 'off';

    const track = local ? (state.local.screen || state.local.webcam)?.track : remoteVideoTrack(p.id);
    const trackId = track ? track.id : null;
    if (tile.trackId !== trackId) {
      tile.trackId = trackId;
      tile.video.srcObject = track ? new MediaStream([track]) : null;
      if (track) tile.video.play().catch(() => {});
    }
    tile.video.hidden = !track;
    tile.placeholder.textContent = track ? '' : initials(p.name);

    if (!local) syncRemoteAudio(tile, p.id);

    tile.label.replaceChildren();
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = local ? `${p.name} (you)` : p.name;
    tile.label.append(name, badge(p.micEnabled ? 'mic on' : 'mic off', p.micEnabled ? 'mic-on' : 'mic-off'));
    if (!p.camEnabled) tile.label.append(badge('cam off', 'cam-off'));
    if (isPinned(p.id)) tile.label.append(badge('pinned', 'pin'));
    if (state.presenterId === p.id) tile.label.append(badge('presenting', 'share'));
    if (p.isAgent) tile.label.append(badge('agent', 'agent'));

    tile.actions.replaceChildren();
    tile.actions.append(button(isPinned(p.id) ? 'Unpin' : 'Pin', isPinned(p.id) ? 'unpin' : 'pin', p.id));
    if (!local && isModerator()) {
      const media = [
        p.micEnabled ? button('Mute', 'disableMic', p.id) : button('Ask mic', 'requestMic', p.id),
        p.camEnabled ? button('Cam off', 'disableCam', p.id) : button('Ask cam', 'requestCam', p.id),
      ];
      // Media moderation is not supported on agents (3068); remove and pin are.
      for (const element of media) {
        element.disabled = p.isAgent;
        tile.actions.append(element);
      }
      tile.actions.append(button('Remove', 'remove', p.id, 'danger'));
    }
    tile.stats.textContent = state.tileStats.get(p.id) || '';
  }

  function initials(name) {
    return (name || '?')
      .split(/\s+/)
      .map((part) => part[0] || '')
      .join('')
      .slice(0, 2)
      .toUpperCase();
  }

  function consumersOf(id, kinds) {
    return [...state.consumers.values()].filter((c) => c.participantId === id && kinds.includes(c.kind));
  }

  function remoteVideoTrack(id) {
    // A screen share wins over the camera, as on most room UIs.
    for (const kinds of [['screen', 'share'], ['webcam', 'video']]) {
      for (const consumer of consumersOf(id, kinds)) {
        const track = state.midTracks.get(consumer.mid);
        if (track && track.readyState === 'live') return track;
      }
    }
    return null;
  }

  function syncRemoteAudio(tile, id) {
    const tracks = new Map();
    for (const consumer of consumersOf(id, ['mic', 'audio', 'screenAudio', 'shareAudio'])) {
      const track = state.midTracks.get(consumer.mid);
      if (track && track.readyState === 'live') tracks.set(track.id, track);
    }
    for (const [trackId, element] of tile.audio) {
      if (!tracks.has(trackId)) {
        element.srcObject = null;
        element.remove();
        tile.audio.delete(trackId);
      }
    }
    for (const [trackId, track] of tracks) {
      if (tile.audio.has(trackId)) continue;
      const element = document.createElement('audio');
      element.autoplay = true;
      element.srcObject = new MediaStream([track]);
      tile.root.appendChild(element);
      element.play().catch(() => {});
      tile.audio.set(trackId, element);
    }
  }

  function renderAudience(audience) {
    const list = $('audience-list');
    list.replaceChildren();
    for (const p of audience) {
      const item = document.createElement('li');
      item.dataset.participantId = p.id;
      const name = document.createElement('span');
      name.className = 'name';
      name.textContent = p.id === state.me ? `${p.name} (you)` : p.name;
      item.append(name);
      if (p.isAgent) item.append(badge('agent', 'agent'));
      if (isPinned(p.id)) item.append(badge('pinned', 'pin'));
      if (p.id !== state.me) {
        // docs/spec/change-mode.md, step 2: an "Invite on Stage" button for each audience member.
        item.append(button('Invite on stage', 'invite', p.id, 'invite'));
        if (isModerator()) item.append(button('Remove', 'remove', p.id, 'danger'));
      }
      list.append(item);
    }
    $('audience-count').textContent = String(audience.length);
  }

  function renderControls() {
    const onStage = myMode() === SEND_AND_RECV;
    const mic = !!state.local.mic;
    const cam = !!state.local.webcam;
    const screen = !!state.local.screen;
    $('btn-mic').textContent = mic ? 'Mute' : 'Unmute';
    $('btn-cam').textContent = cam ? 'Camera off' : 'Camera on';
    $('btn-screen').textContent = screen ? 'Stop sharing' : 'Share screen';
    $('btn-stage').textContent = onStage ? 'Leave the stage' : 'Go on stage';
    for (const id of ['btn-mic', 'btn-cam', 'btn-screen']) $(id).disabled = !onStage || !state.joined;
    $('btn-stage').disabled = !state.joined;
    $('btn-leave').disabled = !state.joined;
    $('btn-stats').setAttribute('aria-pressed', String(state.showStats));
    document.body.classList.toggle('hide-stats', !state.showStats);
  }

  // ---- Notifications ------------------------------------------------------------------------

  const notifications = {
    // Protocol 2: joins, leaves and mode changes coalesced by the server, in order.
    participantEvents(d) {
      for (const event of d.events || []) {
        const handler = event.method !== 'participantEvents' && notifications[event.method];
        if (handler) handler(event.data || {});
      }
    },
    participantJoined(p) {
      remember(p);
      note('participantJoined', p.participantId);
      rebuildLists();
    },
    participantLeft(d) {
      state.participants.delete(d.participantId);
      state.pins.delete(d.participantId);
      for (const [id, consumer] of state.consumers) {
        if (consumer.participantId === d.participantId) state.consumers.delete(id);
      }
      note('participantLeft', d);
      rebuildLists();
    },
    participantModeChanged(d) {
      const p = state.participants.get(d.participantId);
      if (p) p.mode = d.mode;
      note('participantModeChanged', d);
      rebuildLists();
    },
    mediaStatusChanged(d) {
      const p = state.participants.get(d.participantId);
      if (p) {
        if (d.kind === 'mic' || d.kind === 'audio') p.micEnabled = !!d.enabled;
        if (d.kind === 'webcam' || d.kind === 'video') p.camEnabled = !!d.enabled;
      }
      rebuildLists();
    },
    producerAdded() {},
    producerClosed(d) {
      if (d.participantId === state.me) forgetLocal(d.producerId);
    },
    consumerCreated(c) {
      state.consumers.set(c.consumerId, c);
      rebuildLists();
    },
    consumerClosed(c) {
      state.consumers.delete(c.consumerId);
      rebuildLists();
    },
    subscriberOffer(d) {
      state.subChain = state.subChain
        .then(() => answerSubscriberOffer(d))
        .catch((error) => {
          console.error('subscriber offer', error);
          toast(`Receiving media failed: ${error.message}`);
        });
    },
    roomVideoCodecsChanged(d) {
      state.roomVideoCodecs = d.roomVideoCodecs || [];
      note('roomVideoCodecsChanged', d);
    },
    presenterChanged(d) {
      state.presenterId = d.participantId || null;
      rebuildLists();
    },
    speakerChanged(d) {
      state.speakerId = d.participantId || null;
      rebuildLists();
    },
    pinStateChanged(d) {
      state.pins.set(d.participantId, d.pinState || {});
      note('pinStateChanged', d);
      rebuildLists();
    },
    micRequested(d) {
      ask(`${d.name || d.participantId} asks you to turn on your microphone.`, () => setMic(true));
    },
    webcamRequested(d) {
      ask(`${d.name || d.participantId} asks you to turn on your camera.`, () => setCam(true));
    },
    micDisabled(d) {
      dropLocal('mic');
      toast(`${d.name || d.participantId} turned off your microphone.`);
    },
    webcamDisabled(d) {
      dropLocal('webcam');
      toast(`${d.name || d.participantId} turned off your camera.`);
    },
    pubsubMessage(m) {
      if (m.topic === inviteTopic()) return invited(m);
      if (m.topic === CHAT_TOPIC) return addChat([m]);
    },
    pubsubHistory(d) {
      if (d.topic === CHAT_TOPIC) addChat(d.messages || []);
    },
    roomLeft(d) {
      finish(`left the room: ${d.reasonName || ''} (${d.reason})`);
    },
    roomClosed(d) {
      finish(`the room was closed: ${d.reasonName || ''} (${d.reason})`);
    },
    error(d) {
      toast(`Server: ${d.code} ${d.name}: ${d.message}`);
    },
  };

  // ---- Media: publishing --------------------------------------------------------------------

  function waitForGathering(pc, timeoutMs = 5000) {
    if (pc.iceGatheringState === 'complete') return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        if (pc.iceGatheringState === 'complete') {
          pc.removeEventListener('icegatheringstatechange', done);
          resolve();
        }
      };
      pc.addEventListener('icegatheringstatechange', done);
      setTimeout(resolve, timeoutMs); // send what was gathered rather than hang
    });
  }

  function publishConnection() {
    if (!state.pubPc) {
      state.pubPc = new RTCPeerConnection({ iceServers: state.iceServers });
      state.localStream = new MediaStream();
    }
    return state.pubPc;
  }

  // One `produce {tracks, sdp}` for a batch of new tracks; each renegotiation waits for the last.
  function produce(entries) {
    const run = async () => {
      const pc = publishConnection();
      const transceivers = entries.map(({ kind, track }) => {
        const init = { direction: 'sendonly', streams: [state.localStream] };
        // `?svc=L3T3_KEY` (with `?codec=vp9`): one encoding with spatial and temporal layers, from
        // which the SFU picks each subscriber's layers, instead of simulcast.
        const svc = params.get('svc');
        const layers = kind === 'webcam' && state.simulcast && !svc ? simulcastEncodings(track) : null;
        if (kind === 'webcam' && svc) init.sendEncodings = [{ scalabilityMode: svc }];
        else if (layers) init.sendEncodings = layers;
        return pc.addTransceiver(track, init);
      });
      // `?codec=h264` (or vp8, vp9, av1): the video transceivers offer only that codec (and its RTX).
      const codec = (params.get('codec') || '').toLowerCase();
      if (codec && RTCRtpSender.getCapabilities) {
        const all = RTCRtpSender.getCapabilities('video').codecs;
        const chosen = all.filter((c) => c.mimeType.toLowerCase() === 'video/' + codec);
        const rtx = all.filter((c) => c.mimeType.toLowerCase() === 'video/rtx');
        for (const t of transceivers) {
          if (t.sender.track && t.sender.track.kind === 'video' && chosen.length > 0) {
            t.setCodecPreferences([...chosen, ...rtx]);
          }
        }
      }
      await pc.setLocalDescription(await pc.createOffer());
      await waitForGathering(pc);
      let response;
      try {
        response = await request('produce', {
          tracks: entries.map(({ kind }) => ({ kind })),
          sdp: pc.localDescription.sdp,
        });
      } catch (error) {
        await pc.setLocalDescription({ type: 'rollback' }).catch(() => {});
        // Rollback keeps transceivers made by addTransceiver: make them inactive so that the next
        // offer does not present them as new tracks.
        for (const t of transceivers) {
          t.sender.replaceTrack(null).catch(() => {});
          if (!t.stopped) t.direction = 'inactive';
        }
        throw error;
      }
      await pc.setRemoteDescription({ type: 'answer', sdp: response.sdp });
      const producers = response.producers || [response];
      entries.forEach(({ kind, track }, index) => {
        state.local[kind] = { track, transceiver: transceivers[index], producerId: producers[index]?.producerId };
        track.addEventListener('ended', () => {
          if (state.local[kind]?.track === track) stopProducing(kind).catch(() => {});
        });
      });
      note('produced', entries.map((e) => e.kind));
      rebuildLists();
    };
    const result = state.pubChain.then(run);
    state.pubChain = result.catch(() => {});
    return result;
  }

  function dropLocal(kind) {
    const local = state.local[kind];
    if (!local) return;
    delete state.local[kind];
    local.track.stop();
    local.transceiver.sender.replaceTrack(null).catch(() => {});
    // The closed track's m-line stays in later offers; marking it inactive keeps the server from
    // taking it for a new track. A track turned on again gets a new m-line.
    if (!local.transceiver.stopped) local.transceiver.direction = 'inactive';
    rebuildLists();
  }

  function forgetLocal(producerId) {
    for (const kind of Object.keys(state.local)) {
      if (state.local[kind].producerId === producerId) dropLocal(kind);
    }
  }

  async function stopProducing(kind) {
    const local = state.local[kind];
    if (!local) return;
    dropLocal(kind);
    if (local.producerId) await request('closeProducer', { producerId: local.producerId }).catch(() => {});
    if (kind === 'mic' || kind === 'webcam') await request('setMediaStatus', { kind, enabled: false });
  }

  async function capture(mic, cam) {
    if (!mic && !cam) return [];
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: mic,
      video: cam ? { width: { ideal: CAMERA.width }, height: { ideal: CAMERA.height }, frameRate: { ideal: 30 } } : false,
    });
    const entries = [];
    const video = stream.getVideoTracks()[0];
    const audio = stream.getAudioTracks()[0];
    if (video) entries.push({ kind: 'webcam', track: video });
    if (audio) entries.push({ kind: 'mic', track: audio });
    return entries;
  }

  // Turns on the devices asked for that are off; reports each status to the room.
  async function startMedia(mic, cam) {
    const wanted = { mic: mic && !state.local.mic, webcam: cam && !state.local.webcam };
    let entries = [];
    try {
      entries = await capture(wanted.mic, wanted.webcam);
    } catch (error) {
      toast(`Camera/microphone unavailable: ${error.message}`);
    }
    if (entries.length) await produce(entries);
    // Setting the current value again is accepted and announces nothing.
    for (const kind of ['mic', 'webcam']) {
      await request('setMediaStatus', { kind, enabled: !!state.local[kind] }).catch(() => {});
    }
  }

  async function setMic(on) {
    if (on) await startMedia(true, false);
    else await stopProducing('mic');
    state.wantMic = !!state.local.mic;
  }

  async function setCam(on) {
    if (on) await startMedia(false, true);
    else await stopProducing('webcam');
    state.wantCam = !!state.local.webcam;
  }

  async function toggleScreen() {
    if (state.local.screen) return stopProducing('screen');
    const stream = await navigator.mediaDevices.getDisplayMedia({ video: true, audio: false });
    const track = stream.getVideoTracks()[0];
    try {
      await produce([{ kind: 'screen', track }]);
    } catch (error) {
      track.stop();
      throw error;
    }
  }

  // ---- Media: receiving ---------------------------------------------------------------------

  function subscribeConnection() {
    if (!state.subPc) {
      const pc = new RTCPeerConnection({ iceServers: state.iceServers });
      pc.ontrack = (event) => {
        const mid = event.transceiver.mid;
        state.midTracks.set(mid, event.track);
        event.track.addEventListener('ended', () => rebuildLists());
        rebuildLists();
      };
      state.subPc = pc;
    }
    return state.subPc;
  }

  async function answerSubscriberOffer({ sdp, revision }) {
    const pc = subscribeConnection();
    await pc.setRemoteDescription({ type: 'offer', sdp });
    await pc.setLocalDescription(await pc.createAnswer());
    await waitForGathering(pc);
    await request('subscriberAnswer', { sdp: pc.localDescription.sdp, revision });
    note('subscriberAnswer', revision);
    rebuildLists();
  }

  // ---- Modes and invites --------------------------------------------------------------------

  function inviteTopic() {
    return `${INVITE_PREFIX}${state.me}`;
  }

  async function changeMode(mode) {
    const previous = myMode();
    if (previous === SEND_AND_RECV && mode !== SEND_AND_RECV) {
      // Remember what to restore when coming back on stage.
      state.wantMic = !!state.local.mic;
      state.wantCam = !!state.local.webcam;
    }
    // Leaving the stage ends the publish connection on both sides; the next produce opens a new one.
    const leavingStage = previous === SEND_AND_RECV && mode !== SEND_AND_RECV;
    const response = await request('changeMode', leavingStage ? { mode, closePublishConnection: true } : { mode });
    note('changedMode', response);
    if (mode !== SEND_AND_RECV) {
      // The server closed every producer; drop the local side too.
      for (const kind of Object.keys(state.local)) dropLocal(kind);
      if (leavingStage && state.pubPc) {
        state.pubPc.close();
        state.pubPc = null;
      }
    } else {
      await startMedia(state.wantMic, state.wantCam);
    }
    rebuildLists();
  }

  // docs/spec/change-mode.md, steps 1-2: the host side. Only audience members (RECV_ONLY) are invited.
  async function invite(id) {
    const p = state.participants.get(id);
    if (!p || p.mode !== RECV_ONLY) return;
    await request('publish', { topic: `${INVITE_PREFIX}${id}`, message: SEND_AND_RECV });
    note('invited', id);
    toast(`Invitation sent to ${p.name}.`);
  }

  // docs/spec/change-mode.md, step 3: our own topic; on accept, change our own mode.
  function invited(message) {
    const mode = message.message;
    note('inviteReceived', message);
    if (!MODES.has(mode) || mode === myMode()) return;
    const accept = () => changeMode(mode);
    if (state.autoAcceptInvites) {
      accept().catch((error) => toast(`Could not change mode: ${error.message}`));
      return;
    }
    const who = message.senderName || message.senderId;
    ask(
      mode === SEND_AND_RECV ? `${who} invites you on stage.` : `${who} asks you to switch to ${mode}.`,
      accept,
      () => note('inviteDeclined', message.senderId),
    );
  }

  // ---- Prompts ------------------------------------------------------------------------------

  const promptQueue = [];

  function ask(text, onAccept, onDecline) {
    promptQueue.push({ text, onAccept, onDecline });
    if (promptQueue.length === 1) showPrompt();
  }

  function showPrompt() {
    const next = promptQueue[0];
    if (!next) return;
    $('prompt-text').textContent = next.text;
    const dialog = $('prompt');
    if (!dialog.open) dialog.showModal();
  }

  function answerPrompt(accepted) {
    const current = promptQueue.shift();
    $('prompt').close();
    if (current) {
      const action = accepted ? current.onAccept : current.onDecline;
      if (action) Promise.resolve(action()).catch((error) => toast(error.message));
    }
    showPrompt();
  }

  // ---- Chat ---------------------------------------------------------------------------------

  function addChat(messages) {
    const log = $('chat-log');
    for (const m of messages) {
      if (state.chatIds.has(m.id)) continue;
      state.chatIds.add(m.id);
      const item = document.createElement('li');
      const from = document.createElement('span');
      from.className = 'from';
      from.textContent = m.senderName || m.senderId;
      const text = document.createElement('span');
      text.textContent = m.message;
      const time = document.createElement('span');
      time.className = 'time';
      time.textContent = new Date(m.timestamp || Date.now()).toLocaleTimeString([], {
        hour: '2-digit',
        minute: '2-digit',
      });
      item.append(from, text, time);
      log.append(item);
    }
    log.scrollTop = log.scrollHeight;
  }

  async function sendChat(text) {
    await request('publish', { topic: CHAT_TOPIC, message: text, persist: true });
  }

  // ---- Stats overlay ------------------------------------------------------------------------

  function rate(key, bytes, packets, lost, now) {
    const previous = state.statsSamples.get(key);
    state.statsSamples.set(key, { bytes, packets, lost, now });
    if (!previous || now <= previous.now) return null;
    const seconds = (now - previous.now) / 1000;
    const dp = packets - previous.packets;
    const dl = Math.max(0, lost - previous.lost);
    return {
      kbps: Math.max(0, ((bytes - previous.bytes) * 8) / 1000 / seconds),
      loss: dp + dl > 0 ? (100 * dl) / (dp + dl) : 0,
    };
  }

  // A connection's selected candidate pair: local and remote (server) ports (null: none yet).
  async function candidatePath(pc) {
    if (!pc) return null;
    const report = await pc.getStats();
    const candidates = new Map();
    let pair = null;
    report.forEach((s) => {
      if (s.type === 'local-candidate' || s.type === 'remote-candidate') candidates.set(s.id, s);
      if (s.type === 'candidate-pair' && s.nominated && s.state === 'succeeded') pair = s;
    });
    if (!pair) return null;
    return {
      localPort: candidates.get(pair.localCandidateId)?.port || 0,
      remotePort: candidates.get(pair.remoteCandidateId)?.port || 0,
    };
  }

  // The inbound-rtp stats of participant `id`'s first consumer of `kinds` that has them; null when
  // none has (not consumed yet).
  async function inboundStats(id, kinds) {
    for (const consumer of consumersOf(id, kinds)) {
      const s = await receiverStats(consumer.mid);
      if (s) return s;
    }
    return null;
  }

  // The W3C counters `names` of a stats entry, each 0 when the browser leaves it out.
  function counts(s, names) {
    return Object.fromEntries(names.map((name) => [name, s[name] || 0]));
  }

  async function receiverStats(mid) {
    const transceiver = state.subPc?.getTransceivers().find((t) => t.mid === mid);
    if (!transceiver) return null;
    const report = await transceiver.receiver.getStats();
    let inbound = null;
    const codecs = new Map();
    report.forEach((s) => {
      if (s.type === 'inbound-rtp') inbound = s;
      if (s.type === 'codec') codecs.set(s.id, s.mimeType);
    });
    if (inbound) inbound.codec = codecs.get(inbound.codecId) || '';
    return inbound;
  }

  async function senderStats(transceiver) {
    const report = await transceiver.sender.getStats();
    const out = [];
    report.forEach((s) => {
      if (s.type === 'outbound-rtp') out.push(s);
    });
    return out;
  }

  async function refreshStats() {
    if (!state.joined || state.left) return;
    let server = { consumers: [], producers: [] };
    try {
      server = await request('getStats', {});
    } catch {
      // the overlay is best effort
    }
    const serverConsumers = new Map((server.consumers || []).map((c) => [c.consumerId, c]));
    // The server's share of this page's downlink (the stream allocator): its estimate of the link.
    const estimate = server.transport && server.transport.estimate;
    state.serverStats = server;
    const now = performance.now();
    const texts = new Map();
    for (const p of participantsWithMode(SEND_AND_RECV)) {
      const lines = [];
      if (p.id === state.me) {
        const webcam = state.local.screen || state.local.webcam;
        if (webcam) {
          for (const s of await senderStats(webcam.transceiver)) {
            const r = rate(`out-${s.id}`, s.bytesSent || 0, s.packetsSent || 0, 0, now);
            const size = s.frameWidth ? `${s.frameWidth}x${s.frameHeight}` : '';
            lines.push(`sent ${size} ${r ? r.kbps.toFixed(0) : '…'} kbps${s.rid ? ' rid ' + s.rid : ''}`);
          }
        }
      } else {
        for (const consumer of consumersOf(p.id, ['webcam', 'screen', 'mic'])) {
          const s = await receiverStats(consumer.mid);
          if (!s) continue;
          const r = rate(`in-${consumer.consumerId}`, s.bytesReceived || 0, s.packetsReceived || 0, s.packetsLost || 0, now);
          const kbps = r ? r.kbps.toFixed(0) : '…';
          const loss = r ? r.loss.toFixed(1) : '0.0';
          if (consumer.kind === 'mic') {
            lines.push(`audio ${kbps} kbps loss ${loss}%`);
          } else {
            const c = serverConsumers.get(consumer.consumerId) || {};
            const size = s.frameWidth ? `${s.frameWidth}x${s.frameHeight}` : '';
            lines.push(`${(s.codec || '').replace('video/', '')} ${size} ${kbps} kbps loss ${loss}%`);
            let layer = `layer ${c.currentLayer || 'single'}`;
            // One scalable stream (VP9 SVC): the spatial and temporal layers forwarded, and aimed for.
            const svcLayer = (sl, tl) => (sl == null ? '…' : `S${sl}T${tl}`);
            if (c.targetSpatialLayer != null) {
              layer = `layer ${svcLayer(c.currentSpatialLayer, c.currentTemporalLayer)}`;
              const target = svcLayer(c.targetSpatialLayer, c.targetTemporalLayer);
              if (target !== svcLayer(c.currentSpatialLayer, c.currentTemporalLayer)) layer += ` → ${target}`;
            }
            if (c.paused) layer = 'paused (link too slow)';
            else if (c.targetLayer && c.targetLayer !== c.currentLayer) layer += ` → ${c.targetLayer}`;
            lines.push(`${layer} · ${s.framesDecoded || 0} frames`);
            if (estimate) lines.push(`link ${(estimate / 1000).toFixed(0)} kbps`);
          }
        }
      }
      texts.set(p.id, lines.join('\n'));
    }
    state.tileStats = texts;
    for (const [id, tile] of tiles) tile.stats.textContent = texts.get(id) || '';
  }

  // ---- Joining and leaving ------------------------------------------------------------------

  function decodeTokenClaims(token) {
    try {
      const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      return JSON.parse(atob(part + '='.repeat((4 - (part.length % 4)) % 4)));
    } catch {
      return {};
    }
  }

  function makeParticipantId(name) {
    const slug = name
      .toLowerCase()
      .replace(/[^a-z0-9_-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 24);
    return `${slug || 'guest'}-${Math.random().toString(36).slice(2, 7)}`;
  }

  async function devToken(room, participant) {
    const url = `/dev/token?room=${encodeURIComponent(room)}&participant=${encodeURIComponent(participant)}`;
    const response = await fetch(url, { cache: 'no-store' });
    if (response.status === 404) {
      throw new Error('This server is not in development mode: open the page with ?token=… in the URL.');
    }
    const body = await response.json();
    if (!response.ok) throw new Error(body.error?.message || `token request failed (${response.status})`);
    return body.token;
  }

  // The video codecs this browser decodes, declared at join (docs/protocol.md "Video codecs a room
  // accepts"): RTCRtpReceiver's capabilities, or the page option `receiveCodecs=vp8,h264`.
  function receivableVideoCodecs() {
    const option = params.get('receiveCodecs');
    if (option) return option.toLowerCase().split(',').filter(Boolean);
    const capabilities = window.RTCRtpReceiver?.getCapabilities?.('video')?.codecs || [];
    const names = capabilities.map((c) => c.mimeType.replace(/^video\//i, '').toLowerCase());
    return [...new Set(names)].filter((n) => ['vp8', 'h264', 'vp9', 'av1'].includes(n));
  }

  async function join(options) {
    const urlToken = params.get('token');
    const claims = urlToken ? decodeTokenClaims(urlToken) : {};
    const roomId = claims.roomId || options.room;
    const me = claims.participantId || params.get('id') || makeParticipantId(options.name);
    const token = urlToken || (await devToken(roomId, me));
    state.roomId = roomId;
    state.me = me;
    state.myName = options.name;
    state.wantMic = options.mic;
    state.wantCam = options.cam;
    state.simulcast = options.simulcast;
    setStatus('connecting…');
    state.ws = await connect(token);
    const response = await request('join', {
      protocolVersion: 2,
      roomId,
      participantId: me,
      name: options.name,
      mode: options.mode,
      micEnabled: options.mic,
      camEnabled: options.cam,
      autoConsume: true,
      videoCodecs: receivableVideoCodecs(),
    });
    state.joined = true;
    state.roomVideoCodecs = response.roomVideoCodecs || ['vp8'];
    state.me = response.participant.participantId;
    state.permissions = response.permissions || [];
    remember(response.participant);
    for (const p of response.participants || []) remember(p);
    for (const pin of response.pinStates || []) state.pins.set(pin.participantId, pin.pinState || {});
    state.presenterId = response.presenterId || null;
    state.iceServers = Array.isArray(response.iceServers) ? response.iceServers : [];
    note('joined', { roomId, me: state.me, mode: options.mode });

    $('join-form').hidden = true;
    $('room').hidden = false;
    $('room-title').textContent = roomId;
    document.title = `${roomId} · Understudy`;
    setStatus(`joined as ${options.name}${isModerator() ? ' (moderator)' : ''}`);
    history.replaceState(null, '', `/room/${encodeURIComponent(roomId)}${location.search}`);
    rebuildLists();

    // Subscribe only after the join (docs/spec/change-mode.md, step 3).
    await request('subscribe', { topic: inviteTopic() });
    await request('subscribe', { topic: CHAT_TOPIC });
    if (options.mode === SEND_AND_RECV) await startMedia(options.mic, options.cam);
    state.statsTimer = setInterval(() => refreshStats().catch(() => {}), 2000);
  }

  function finish(reason) {
    if (state.left) return;
    state.left = reason;
    state.joined = false;
    note('left', reason);
    clearInterval(state.statsTimer);
    for (const kind of Object.keys(state.local)) {
      state.local[kind].track.stop();
      delete state.local[kind];
    }
    state.pubPc?.close();
    state.subPc?.close();
    setStatus(reason);
    toast(reason);
    renderControls();
  }

  async function leave() {
    try {
      await request('leave', {});
    } catch {
      // the socket may already be gone
    }
    finish('you left the room');
    state.ws?.close();
  }

  // ---- Wiring -------------------------------------------------------------------------------

  async function act(action, id) {
    switch (action) {
      case 'invite':
        return invite(id);
      case 'pin':
        return request('pin', { participantId: id, pinType: 'SHARE_AND_CAM' });
      case 'unpin':
        return request('unpin', { participantId: id, pinType: 'SHARE_AND_CAM' });
      case 'requestMic':
      case 'requestCam':
      case 'disableMic':
      case 'disableCam':
      case 'remove':
        return request(action, { participantId: id });
    }
  }

  function guarded(work) {
    return () =>
      Promise.resolve()
        .then(work)
        .catch((error) => toast(error.message))
        .finally(() => rebuildLists());
  }

  function readForm() {
    return {
      name: $('join-name').value.trim(),
      room: $('join-room').value.trim(),
      mode: document.querySelector('input[name="mode"]:checked').value,
      cam: $('join-cam').checked,
      mic: $('join-mic').checked,
      simulcast: $('join-simulcast').checked,
    };
  }

  function start() {
    const pathRoom = location.pathname.startsWith('/room/')
      ? decodeURIComponent(location.pathname.slice('/room/'.length))
      : '';
    $('join-room').value = params.get('room') || pathRoom;
    $('join-name').value = params.get('name') || '';
    const mode = (params.get('mode') || SEND_AND_RECV).toUpperCase();
    for (const radio of document.querySelectorAll('input[name="mode"]')) radio.checked = radio.value === mode;
    $('join-cam').checked = flag('cam', true);
    $('join-mic').checked = flag('mic', true);
    $('join-simulcast').checked = state.simulcast;
    if (params.get('token')) $('join-note').textContent = 'Using the token from the URL.';

    $('join-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const button = $('join-button');
      button.disabled = true;
      join(readForm()).catch((error) => {
        button.disabled = false;
        $('join-note').textContent = error.message;
        setStatus('not joined');
        note('joinFailed', error.message);
      });
    });

    document.addEventListener('click', (event) => {
      const target = event.target.closest('button[data-action]');
      if (!target) return;
      guarded(() => act(target.dataset.action, target.dataset.participantId))();
    });
    $('btn-mic').addEventListener('click', guarded(() => setMic(!state.local.mic)));
    $('btn-cam').addEventListener('click', guarded(() => setCam(!state.local.webcam)));
    $('btn-screen').addEventListener('click', guarded(toggleScreen));
    $('btn-stage').addEventListener(
      'click',
      guarded(() => changeMode(myMode() === SEND_AND_RECV ? RECV_ONLY : SEND_AND_RECV)),
    );
    $('btn-stats').addEventListener('click', () => {
      state.showStats = !state.showStats;
      renderControls();
    });
    $('btn-leave').addEventListener('click', guarded(leave));
    $('prompt-accept').addEventListener('click', () => answerPrompt(true));
    $('prompt-decline').addEventListener('click', () => answerPrompt(false));
    $('prompt').addEventListener('cancel', (event) => {
      event.preventDefault();
      answerPrompt(false);
    });
    $('chat-form').addEventListener('submit', (event) => {
      event.preventDefault();
      const input = $('chat-input');
      const text = input.value.trim();
      if (!text) return;
      input.value = '';
      sendChat(text).catch((error) => toast(error.message));
    });
    renderControls();

    if (flag('autoJoin', false) && $('join-name').value && $('join-room').value) {
      $('join-form').requestSubmit();
    }
  }

  // A small read-only window into the page, for tests and for curious people in DevTools.
  window.understudyRoom = {
    snapshot() {
      const ids = (mode) => participantsWithMode(mode).map((p) => p.id);
      return {
        joined: state.joined,
        left: state.left,
        me: state.me,
        mode: myMode() || null,
        permissions: state.permissions,
        stage: ids(SEND_AND_RECV),
        audience: ids(RECV_ONLY),
        stageDom: [...document.querySelectorAll('#stage-list .tile')].map((e) => e.dataset.participantId),
        audienceDom: [...document.querySelectorAll('#audience-list li')].map((e) => e.dataset.participantId),
        pinnedDom: [...document.querySelectorAll('#stage-list .tile[data-pinned="true"]')].map(
          (e) => e.dataset.participantId,
        ),
        pins: Object.fromEntries(state.pins),
        producing: Object.keys(state.local),
        publishConnection: state.pubPc ? state.pubPc.connectionState : null,
        chat: [...document.querySelectorAll('#chat-log li')].map((e) => e.textContent),
        events: state.events.map((e) => e.event),
        toasts: state.events.filter((e) => e.event === 'toast').map((e) => e.detail),
        presenter: state.presenterId,
        roomVideoCodecs: state.roomVideoCodecs || [],
        receiving: [...state.consumers.values()]
          .filter((c) => state.midTracks.get(c.mid)?.readyState === 'live')
          .map((c) => `${c.participantId}:${c.kind}`),
        prompt: $('prompt').open ? $('prompt-text').textContent : null,
        micOffDom: [...document.querySelectorAll('#stage-list .tile[data-mic="off"]')].map(
          (e) => e.dataset.participantId,
        ),
      };
    },
    // The publish connection's send-side estimate and video send counters, from getStats().
    async publishStats() {
      if (!state.pubPc) return null;
      const report = await state.pubPc.getStats();
      let estimate = 0;
      let bytes = 0;
      let width = 0;
      const layers = [];
      let framesSent = 0;
      let codec = null;
      report.forEach((s) => {
        if (s.type === 'candidate-pair' && s.nominated && s.availableOutgoingBitrate)
          estimate = Math.max(estimate, s.availableOutgoingBitrate);
        if (s.type === 'outbound-rtp' && s.kind === 'video') {
          bytes += s.bytesSent;
          width = Math.max(width, s.frameWidth || 0);
          layers.push({ rid: s.rid || null, width: s.frameWidth || 0, height: s.frameHeight || 0, bytes: s.bytesSent });
          framesSent += s.framesSent || 0;
          const c = s.codecId && report.get(s.codecId);
          if (c) codec = c.mimeType;
        }
      });
      layers.sort((a, b) => a.width - b.width);
      return { estimate, bytes, width, layers, framesSent, codec, simulcast: state.simulcast, at: performance.now() };
    },
    // Video decoding of a remote participant's tile, from getStats().
    async videoStats(id) {
      const s = await inboundStats(id, ['webcam', 'screen']);
      if (!s) {
        return { framesDecoded: 0, codec: null, width: 0, height: 0, packetsLost: 0, packetsReceived: 0, freezeCount: 0 };
      }
      return {
        codec: s.codec,
        width: s.frameWidth || 0,
        height: s.frameHeight || 0,
        // retransmittedPacketsReceived: libwebrtc counts a packet repaired by RTX as lost on the media SSRC.
        ...counts(s, ['framesDecoded', 'packetsLost', 'packetsReceived', 'retransmittedPacketsReceived', 'nackCount',
          'bytesReceived', 'freezeCount', 'totalFreezesDuration', 'framesPerSecond']),
      };
    },
    // Received audio of a remote participant (inbound-rtp counters), or null before it is consumed.
    async audioStats(id) {
      const s = await inboundStats(id, ['mic']);
      return s && counts(s, ['packetsReceived', 'packetsLost', 'bytesReceived', 'concealedSamples', 'totalSamplesReceived']);
    },
    // The subscribe connection's selected candidate pair: local and remote (server) ports.
    async subscribePath() {
      return candidatePath(state.subPc);
    },
    // The same for the publish connection.
    async publishPath() {
      return candidatePath(state.pubPc);
    },
    // Received video of a remote participant as W3C stats name it (freezes included).
    async receivedVideo(id) {
      const s = await inboundStats(id, ['webcam', 'screen']);
      if (!s) return null;
      return {
        width: s.frameWidth || 0,
        height: s.frameHeight || 0,
        ...counts(s, ['framesDecoded', 'bytesReceived', 'freezeCount', 'totalFreezesDuration']),
      };
    },
    // Asks the server for a remote participant's webcam at `quality` (low, medium, high), as the
    // SDK's setQuality does.
    setQuality(id, quality) {
      return request('setQuality', { participantId: id, quality, kind: 'webcam' });
    },
    // A fresh getStats answer (consumers' layers, the transport's estimate); the overlay's last one
    // (up to 2 s old) when the request fails.
    async serverStats() {
      try {
        return await request('getStats', {});
      } catch {
        return state.serverStats || null;
      }
    },
    tileStatsText(id) {
      return tiles.get(id)?.stats.textContent || '';
    },
    sendChat,
  };

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
