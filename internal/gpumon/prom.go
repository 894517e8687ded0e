package gpumon

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WritePrometheus writes the latest sample and the last completed report
// interval in the Prometheus text format (version 0.0.4). The device
// metrics use dcgm-exporter's names, units and labels (DCGM_FI_DEV_FB_USED
// and _FREE in MiB, DCGM_FI_DEV_GPU_UTIL in percent; labels gpu, UUID,
// pci_bus_id, device, modelName, Hostname, and GPU_I_ID for a MIG
// instance), so dashboards built for dcgm-exporter read them unchanged;
// gpumem's own metrics are in bytes.
func WritePrometheus(w io.Writer, hostname string, s Sample, last []Interval) error {
	pw := &promWriter{w: w}
	devs := make([]Device, 0, len(s.Devices))
	for _, d := range s.Devices {
		if d.MemKnown {
			devs = append(devs, d)
		}
	}
	const mib = 1 << 20
	pw.family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).")
	for _, d := range devs {
		pw.sample("DCGM_FI_DEV_FB_USED", dcgmLabels(d, hostname), strconv.FormatUint(d.Used/mib, 10))
	}
	pw.family("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).")
	for _, d := range devs {
		pw.sample("DCGM_FI_DEV_FB_FREE", dcgmLabels(d, hostname), strconv.FormatUint(d.Free/mib, 10))
	}
	pw.family("DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB).")
	for _, d := range devs {
		pw.sample("DCGM_FI_DEV_FB_TOTAL", dcgmLabels(d, hostname), strconv.FormatUint(d.Total/mib, 10))
	}
	pw.family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")
	for _, d := range devs {
		if d.Util >= 0 {
			pw.sample("DCGM_FI_DEV_GPU_UTIL", dcgmLabels(d, hostname), strconv.Itoa(d.Util))
		}
	}
	pw.family("gpumem_fb_used_bytes", "Framebuffer memory used at the last sample, in bytes.")
	for _, d := range devs {
		pw.sample("gpumem_fb_used_bytes", ownLabels(d), strconv.FormatUint(d.Used, 10))
	}
	pw.family("gpumem_fb_used_interval_peak_bytes", "Largest framebuffer memory used in the last completed report period (the peak since the report before it), in bytes.")
	for _, iv := range last {
		if iv.Samples > 0 {
			pw.sample("gpumem_fb_used_interval_peak_bytes", ownLabels(iv.Device), strconv.FormatUint(iv.Peak, 10))
		}
	}
	pw.family("gpumem_fb_used_interval_min_bytes", "Smallest framebuffer memory used in the last completed report period, in bytes.")
	for _, iv := range last {
		if iv.Samples > 0 {
			pw.sample("gpumem_fb_used_interval_min_bytes", ownLabels(iv.Device), strconv.FormatUint(iv.Min, 10))
		}
	}
	pw.family("gpumem_fb_used_interval_mean_bytes", "Mean framebuffer memory used over the samples of the last completed report period, in bytes.")
	for _, iv := range last {
		if iv.Samples > 0 {
			pw.sample("gpumem_fb_used_interval_mean_bytes", ownLabels(iv.Device), strconv.FormatUint(iv.Mean, 10))
		}
	}
	pw.family("gpumem_process_used_bytes", "Device memory a process held at the last sample, in bytes.")
	for _, p := range s.Procs {
		if p.Used < 0 {
			continue
		}
		l := processLabels(s.Devices, p)
		pw.sample("gpumem_process_used_bytes", l, strconv.FormatInt(p.Used, 10))
	}
	pw.family("gpumem_process_used_interval_peak_bytes", "Largest device memory a process held in the last completed report period, in bytes.")
	for _, iv := range last {
		for _, p := range iv.Procs {
			if p.Peak >= 0 {
				l := append(ownLabels(iv.Device), [2]string{"pid", strconv.Itoa(p.PID)}, [2]string{"command", p.Command})
				pw.sample("gpumem_process_used_interval_peak_bytes", l, strconv.FormatInt(p.Peak, 10))
			}
		}
	}
	return pw.err
}

func dcgmLabels(d Device, hostname string) [][2]string {
	l := [][2]string{{"gpu", strconv.Itoa(d.Index)}, {"UUID", d.UUID}}
	if d.PCIBusID != "" {
		l = append(l, [2]string{"pci_bus_id", d.PCIBusID})
	}
	l = append(l, [2]string{"device", "nvidia" + strconv.Itoa(d.Index)}, [2]string{"modelName", d.Name})
	if d.MIG >= 0 {
		l = append(l, [2]string{"GPU_I_ID", strconv.Itoa(d.MIG)})
	}
	return append(l, [2]string{"Hostname", hostname})
}

func ownLabels(d Device) [][2]string {
	l := [][2]string{{"gpu", strconv.Itoa(d.Index)}, {"UUID", d.UUID}}
	if d.MIG >= 0 {
		l = append(l, [2]string{"GPU_I_ID", strconv.Itoa(d.MIG)})
	}
	return l
}

func processLabels(devs []Device, p Process) [][2]string {
	d := Device{Index: p.Device, UUID: p.UUID, MIG: -1}
	k := procDeviceKey(devs, p)
	for _, dd := range devs {
		if DeviceKey(dd) == k {
			d = dd
		}
	}
	return append(ownLabels(d), [2]string{"pid", strconv.Itoa(p.PID)}, [2]string{"command", p.Command})
}

type promWriter struct {
	w   io.Writer
	err error
}

func (p *promWriter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *promWriter) family(name, help string) {
	p.printf("# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
}

func (p *promWriter) sample(name string, labels [][2]string, value string) {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l[0])
		b.WriteString(`="`)
		b.WriteString(labelEscaper.Replace(l[1]))
		b.WriteByte('"')
	}
	b.WriteString("} ")
	b.WriteString(value)
	b.WriteByte('\n')
	p.printf("%s", b.String())
}

// labelEscaper escapes a label value as the text format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
