// `tessera segment --report`: the volume with its label map in NiiVue (axial, coronal, sagittal, 3-D),
// an opacity slider and a legend (name, colour, mL, Dice); a legend row moves the crosshair onto its label.
import { Niivue, NVImage, SHOW_RENDER } from '@niivue/niivue';
import { base64ToBuffer, el, fixed, header, injectStyle, ready, reportData, swatch, table } from './common.js';

async function main() {
  injectStyle();
  const d = reportData();
  const canvas = el('canvas', { id: 'niivue' });
  const opacity = el('input', { id: 'opacity', type: 'range', min: '0', max: '1', step: '0.05', value: String(d.opacity) });
  const hasDice = d.legend.some((l) => l.dice !== undefined);
  const rows = d.legend.map((l) => {
    const r = [el('span', {}, swatch(l.color), l.name), l.label, fixed(l.volume_ml, 2)];
    if (hasDice) r.push(fixed(l.dice, 3));
    return r;
  });
  const cols = ['label', 'id', 'volume (mL)'];
  if (hasDice) cols.push('Dice');
  const legend = table(cols, rows, 'legend');
  const side = el('div', { class: 'side' }, el('h2', {}, 'Labels'), legend,
    el('p', { class: 'note' }, hasDice ? `Dice against ${d.reference}.` : 'No --reference: no Dice.'),
    el('div', { class: 'controls' }, el('label', {}, 'label opacity ', opacity)),
    el('p', { class: 'note' }, `${d.size.join(' × ')} voxels, spacing ${d.spacing_mm.map((s) => s.toFixed(3)).join(' × ')} mm, ${d.orientation}. Click a label to go to it.`));
  document.body.append(header(d, d.input), el('main', {}, el('div', { class: 'viewer' }, canvas), side));

  const nv = new Niivue({ backColor: [0, 0, 0, 1], show3Dcrosshair: true, isColorbar: false, isRadiologicalConvention: true, logLevel: 'error' });
  await nv.attachToCanvas(canvas);
  const image = await NVImage.new(base64ToBuffer(d.image), 'image.nii.gz');
  const labels = await NVImage.new(base64ToBuffer(d.labels), 'labels.nii.gz');
  if (d.window) [image.cal_min, image.cal_max] = d.window;
  const maxLabel = Math.max(0, ...d.legend.map((l) => l.label));
  const cm = { R: [], G: [], B: [], A: [], I: [], labels: [] };
  for (let k = 0; k <= maxLabel; k++) {
    const l = d.legend.find((x) => x.label === k);
    const c = l ? l.color : [0, 0, 0];
    cm.R.push(c[0]); cm.G.push(c[1]); cm.B.push(c[2]); cm.A.push(k === 0 || !l ? 0 : 255); cm.I.push(k);
    cm.labels.push(l ? l.name : '');
  }
  labels.setColormapLabel(cm);
  nv.addVolume(image);
  nv.addVolume(labels);
  nv.setOpacity(1, Number(opacity.value));
  nv.opts.multiplanarShowRender = SHOW_RENDER.ALWAYS;
  nv.setSliceType(nv.sliceTypeMultiplanar);
  opacity.addEventListener('input', () => nv.setOpacity(1, Number(opacity.value)));
  // A legend row puts the crosshair on a voxel of its label (the one nearest the label's centroid).
  // The file's voxel (i, j, k) in NiiVue's RAS-ordered voxel grid (axes permuted and flipped, never resampled).
  const fracOf = (l) => {
    const perm = labels.permRAS, dims = labels.hdr.dims;
    const v = [0, 1, 2].map((r) => {
      const axis = Math.abs(perm[r]) - 1;
      return perm[r] < 0 ? dims[axis + 1] - 1 - l.inside_voxel[axis] : l.inside_voxel[axis];
    });
    return nv.vox2frac(v, 1);
  };
  legend.querySelectorAll('tbody tr').forEach((tr, i) => {
    const l = d.legend[i];
    if (!l.inside_voxel) return;
    tr.style.cursor = 'pointer';
    tr.addEventListener('click', () => {
      nv.scene.crosshairPos = fracOf(l);
      nv.drawScene();
    });
  });
  // For tests and scripted screenshots: where a label's voxel is drawn in the axial view.
  window.tesseraReport = {
    axialCanvasPos(label) {
      const l = d.legend.find((x) => x.label === label);
      const p = nv.frac2canvasPosWithTile(fracOf(l), nv.sliceTypeAxial);
      return p ? { x: p.pos[0] / nv.uiData.dpr, y: p.pos[1] / nv.uiData.dpr } : null;
    },
  };
  nv.drawScene();
  ready();
}

main().catch((e) => {
  console.error('tessera report: ' + (e && e.stack ? e.stack : e));
});
