// `tessera video --report`: the video with its phase timeline under it (a click seeks the video)
// and the time spent in each phase.
import { el, fixed, header, injectStyle, ready, reportData, swatch, table } from './common.js';

function clock(s) {
  const m = Math.floor(s / 60);
  return `${m}:${String(Math.floor(s - 60 * m)).padStart(2, '0')}`;
}

function main() {
  injectStyle();
  const d = reportData();
  const video = el('video', { id: 'video', controls: '', preload: 'auto', src: d.video });
  const timeline = el('div', { id: 'timeline', title: 'click to seek' });
  for (const s of d.segments) {
    const seg = el('div', { class: 'seg', style: `flex: ${s.end - s.start} 0 0; background: rgb(${s.color.join(',')})` });
    seg.title = `${clock(s.start)}–${clock(s.end)}${s.name ? ': ' + s.name : ''}`;
    timeline.append(seg);
  }
  const playhead = el('div', { id: 'playhead' });
  timeline.append(playhead);
  const axis = el('div', { class: 'axis' }, el('span', {}, '0:00'), el('span', {}, clock(d.duration_s)));
  const side = el('div', { class: 'side' });
  if (d.phases.length) {
    side.append(el('h2', {}, 'Phases'), table(['phase', 'seconds', 'share'],
      d.phases.map((p) => [el('span', {}, swatch(p.color), p.name), fixed(p.seconds, 0), fixed(100 * p.fraction, 1) + ' %']), 'phases'));
  } else {
    side.append(el('h2', {}, 'Timeline'), el('p', { class: 'note' },
      'No temporal model with labels ran (--temporal-weights, --labels): seconds are coloured by the first three principal components of their embeddings.'));
  }
  side.append(el('p', { class: 'note' }, d.transcoded ? `Re-encoded to H.264/MP4 for the browser (source: ${d.source_codec}).` : `Source video (${d.source_codec}).`));
  document.body.append(header(d, d.input), el('main', {}, el('div', { class: 'viewer' }, video, timeline, axis), side));

  const duration = () => (Number.isFinite(video.duration) && video.duration > 0 ? video.duration : d.duration_s);
  timeline.addEventListener('click', (ev) => {
    const r = timeline.getBoundingClientRect();
    video.currentTime = Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width)) * duration();
  });
  const place = () => { playhead.style.left = `${(100 * video.currentTime) / duration()}%`; };
  video.addEventListener('timeupdate', place);
  video.addEventListener('seeked', place);
  if (video.readyState >= 1) ready();
  else video.addEventListener('loadedmetadata', ready, { once: true });
}

main();
