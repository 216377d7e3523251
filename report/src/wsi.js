// `tessera embed-wsi --report`: the slide in OpenSeadragon from the Deep Zoom pyramid tessera wrote beside
// the page, with the tissue contour and tile grid, and the per-tile score heat map when one was computed.
import OpenSeadragon from 'openseadragon';
import { el, fixed, header, injectStyle, ready, reportData } from './common.js';

function main() {
  injectStyle();
  const d = reportData();
  const info = el('p', { id: 'tile-info', class: 'note' }, 'Click a tile for its score.');
  const toggles = el('div', { class: 'controls' });
  const side = el('div', { class: 'side' }, el('h2', {}, 'Slide'),
    el('p', {}, `${d.slide.width} × ${d.slide.height} px at level 0, ${fixed(d.slide.mpp, 3)} µm/px`),
    el('p', {}, `${d.tiles.coords.length} tiles of ${d.tiles.size_level0} level-0 px (${d.tiles.target_mpp} µm/px), tissue ${fixed(100 * d.tissue_fraction, 1)} %`),
    el('p', {}, `slide embedding: ${d.pooling}`), toggles);
  if (d.heat) {
    const stops = d.heat.colorbar.map((c, i) => `rgb(${c.join(',')}) ${(100 * i) / (d.heat.colorbar.length - 1)}%`);
    side.append(el('h2', {}, 'Heat map'), el('p', { class: 'note' }, d.heat.title),
      el('div', { class: 'colorbar', style: `background: linear-gradient(to right, ${stops.join(',')})` }),
      el('div', { class: 'axis', style: 'width: 222px' }, el('span', {}, fixed(d.heat.min, 3)), el('span', {}, fixed(d.heat.max, 3))));
  }
  side.append(info);
  const osd = el('div', { id: 'osd' });
  document.body.append(header(d, d.input), el('main', {}, el('div', { class: 'viewer' }, osd), side));

  const z = d.dzi;
  const viewer = OpenSeadragon({
    element: osd,
    // Tiles are local files: the canvas drawer draws them where WebGL would refuse file:// textures.
    drawer: 'canvas',
    showNavigationControl: false,
    showNavigator: false,
    tileSources: {
      Image: { xmlns: 'http://schemas.microsoft.com/deepzoom/2008', Url: z.url, Format: z.format, Overlap: String(z.overlap),
        TileSize: String(z.tile_size), Size: { Width: String(d.slide.width), Height: String(d.slide.height) } },
    },
  });
  viewer.addHandler('open', () => {
    for (const o of d.overlays) {
      viewer.addTiledImage({
        tileSource: { type: 'image', url: o.image, buildPyramid: false },
        x: 0, y: 0, width: 1, opacity: o.visible ? o.opacity : 0,
        success: (ev) => {
          const box = el('input', { type: 'checkbox', 'data-overlay': o.name });
          box.checked = o.visible;
          box.addEventListener('change', () => { ev.item.setOpacity(box.checked ? o.opacity : 0); });
          toggles.append(el('label', {}, box, ' ' + o.name));
        },
      });
    }
  });
  const fullyLoaded = () => viewer.world.getItemCount() === 1 + d.overlays.length &&
    [...Array(viewer.world.getItemCount()).keys()].every((i) => viewer.world.getItemAt(i).getFullyLoaded());
  const poll = setInterval(() => {
    if (fullyLoaded()) { clearInterval(poll); ready(); }
  }, 100);
  // A click on the slide names the tile under it and its score.
  const size = d.tiles.size_level0;
  viewer.addHandler('canvas-click', (ev) => {
    if (!ev.quick) return;
    const p = viewer.world.getItemAt(0).viewerElementToImageCoordinates(ev.position);
    const i = d.tiles.coords.findIndex(([x, y]) => p.x >= x && p.x < x + size && p.y >= y && p.y < y + size);
    info.textContent = i < 0 ? 'No tile here.' : `tile ${i} at (${d.tiles.coords[i].join(', ')})` +
      (d.heat ? `: score ${fixed(d.heat.scores[i], 4)}` : '');
  });
  // For tests and scripted screenshots: where a level-0 point is drawn, in page pixels.
  window.tesseraReport = {
    pagePos(x, y) {
      const p = viewer.world.getItemAt(0).imageToViewerElementCoordinates(new OpenSeadragon.Point(x, y));
      const r = osd.getBoundingClientRect();
      return { x: r.left + p.x, y: r.top + p.y };
    },
  };
}

main();
